module goproxy

go 1.22
