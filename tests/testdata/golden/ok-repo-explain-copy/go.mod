module example.com/ring

go 1.26
