package archs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/pipe-engine/pipe/"

// TestOnlyArchsImportsFamilies: a family is one folder. No package outside
// the family folders — and none of their tests outside them — imports a
// family's package except this one (archs.go's blank imports), so removing
// a family touches its folder, the import line here, README and testdata
// (model/family's doc shows it for deepseek4). A family may build on
// another's pieces (qwen3next on qwen35moe's).
func TestOnlyArchsImportsFamilies(t *testing.T) {
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, "archs.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	families := map[string]bool{} // "model/<family>"
	for _, im := range af.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		families[strings.TrimPrefix(p, module)] = true
	}
	if len(families) == 0 {
		t.Fatal("archs.go imports no family")
	}
	root := filepath.Join("..", "..")
	checked := 0
	err = filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if e.IsDir() {
			if e.Name() == "testdata" || (strings.HasPrefix(e.Name(), ".") && rel != ".") || families[rel] || rel == "model/archs" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if families[strings.TrimPrefix(p, module)] {
				t.Errorf("%s imports the family package %s: only model/archs and family folders may", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d Go files checked outside the families", checked)
	}
}
