package stages

import (
	"strconv"
	"strings"
)

func splitLines(s string) []string { return strings.Split(s, "\n") }

func cutInt(line, prefix string) (int64, bool) {
	rest, ok := strings.CutPrefix(line, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
	return n, err == nil
}
