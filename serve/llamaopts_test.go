package serve

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
)

// TestNoUI: without the chat page (llama-server's --no-ui) / and its files
// are 404; with it / is the page.
func TestNoUI(t *testing.T) {
	if got, _, b := start(t, nil).send(http.MethodGet, "/", "", ""); got != http.StatusOK {
		t.Fatalf("/ with the page: %d %s", got, b)
	}
	h := start(t, func(o *Options) { o.NoUI = true })
	for _, p := range []string{"/", "/page/app.js"} {
		if got, _, b := h.send(http.MethodGet, p, "", ""); got != http.StatusNotFound {
			t.Errorf("%s with NoUI: %d, want 404: %s", p, got, b)
		}
	}
}

// TestModelAliasesAndTags: /v1/models lists the aliases and tags (as
// llama-server's --alias a,b and --tags), and empty arrays without them.
func TestModelAliasesAndTags(t *testing.T) {
	type entry struct {
		ID      string   `json:"id"`
		Aliases []string `json:"aliases"`
		Tags    []string `json:"tags"`
	}
	models := func(h *harness) entry {
		got, _, b := h.send(http.MethodGet, "/v1/models", "", "")
		var r struct{ Data []entry }
		if err := json.Unmarshal([]byte(b), &r); got != 200 || err != nil || len(r.Data) != 1 {
			t.Fatalf("/v1/models: %d %v %s", got, err, b)
		}
		return r.Data[0]
	}
	e := models(start(t, func(o *Options) {
		o.ModelID, o.ModelAliases, o.ModelTags = "code", []string{"code", "fim", "tinyllama-2"}, []string{"chat", "fim", "small"}
	}))
	if e.ID != "code" || !slices.Equal(e.Aliases, []string{"code", "fim", "tinyllama-2"}) || !slices.Equal(e.Tags, []string{"chat", "fim", "small"}) {
		t.Errorf("with aliases and tags: %+v", e)
	}
	if e := models(start(t, nil)); e.Aliases == nil || e.Tags == nil || len(e.Aliases)+len(e.Tags) != 0 {
		t.Errorf("without: %+v, want empty arrays", e)
	}
}
