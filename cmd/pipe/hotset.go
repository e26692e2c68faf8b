package main

import "github.com/pipe-engine/pipe/decode"

// HotSetFlags are the warm-start flags of the commands that decode.
type HotSetFlags struct {
	HotSet    string `name:"hot-set" help:"Hot-set file: the experts' popularity, saved when the run ends and read at the next start for --warm-start ('auto': <user cache dir>/pipe/<model header sha256>.hot; 'none': neither read nor saved)." default:"auto"`
	WarmStart bool   `name:"warm-start" help:"Read the hot set's hottest experts into the cache in the background while the prompt is tokenized and prefilled (speculative: never delays a demand read, never exceeds the budget; false for A/B)." default:"true" negatable:""`
}

// options are the decode options of the flags.
func (f *HotSetFlags) options() decode.HotSetOptions {
	path := f.HotSet
	if path == "none" {
		path = ""
	}
	return decode.HotSetOptions{Path: path, Warm: f.WarmStart}
}
