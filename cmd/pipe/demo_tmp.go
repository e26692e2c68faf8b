package main

import "errors"

const demoCacheMB = 256

func ensureDemo(g *Globals) (string, error) { return "", errors.New("demo not wired yet") }
