//go:build !unix

package qwen35moe

func processCPUSeconds() float64 { return 0 }
