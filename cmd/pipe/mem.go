package main

import "github.com/pipe-engine/pipe/cache"

// availableMemory is the memory the process may use: the tighter of its
// cgroup limit (minus usage) and MemAvailable; 0 when unknown.
func availableMemory() int64 {
	a, err := cache.AutoBudget(cache.AutoOptions{})
	if err != nil {
		return 0
	}
	return a.Available
}
