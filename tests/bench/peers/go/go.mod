module go_echo

go 1.19
