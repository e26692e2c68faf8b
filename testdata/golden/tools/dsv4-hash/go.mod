module hashtool

go 1.26.8

require github.com/pipe-engine/pipe v0.0.0

replace github.com/pipe-engine/pipe => ../../../..
