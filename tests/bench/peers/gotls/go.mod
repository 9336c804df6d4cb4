module go_tls_echo

go 1.21
