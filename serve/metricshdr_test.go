package serve

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestMetricsStartHeader: /metrics carries llama-server's
// Process-Start-Time-Unix header, the server's start in Unix seconds.
func TestMetricsStartHeader(t *testing.T) {
	before := time.Now().Unix()
	h := start(t, nil)
	got, hdr, b := h.send(http.MethodGet, "/metrics", "", "")
	if got != http.StatusOK {
		t.Fatalf("/metrics: %d %s", got, b)
	}
	v, err := strconv.ParseInt(hdr.Get("Process-Start-Time-Unix"), 10, 64)
	if err != nil || v < before || v > time.Now().Unix() {
		t.Errorf("Process-Start-Time-Unix %q (%v), want the start, in %d..now", hdr.Get("Process-Start-Time-Unix"), err, before)
	}
}
