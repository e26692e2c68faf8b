package grammar

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// visit adds the rules for schema under name and returns the rule to use
// (common_schema_converter::visit, in its order of checks).
func (c *converter) visit(schema *jv, name string) string {
	typ := schema.get("type")
	format := ""
	if f := schema.get("format"); f != nil && f.kind == 's' {
		format = f.str
	}
	ruleName := name
	if reserved(name) {
		ruleName = name + "-"
	} else if name == "" {
		ruleName = "root"
	}
	untyped := typ == nil
	switch {
	case schema.has("$ref"):
		return c.addRule(ruleName, c.resolveRef(schema.get("$ref").str))
	case schema.has("oneOf") || schema.has("anyOf"):
		alts := schema.get("oneOf")
		if alts == nil {
			alts = schema.get("anyOf")
		}
		return c.addRule(ruleName, c.union(name, alts.vals))
	case typ != nil && typ.kind == 'a':
		var alts []*jv
		for _, t := range typ.vals {
			cp := *schema
			cp.vals = append([]*jv(nil), schema.vals...)
			cp.vals[schema.index("type")] = t
			alts = append(alts, &cp)
		}
		return c.addRule(ruleName, c.union(name, alts))
	case schema.has("const"):
		return c.addRule(ruleName, formatLiteral(schema.get("const").dump()))
	case schema.has("enum"):
		var vals []string
		for _, v := range schema.get("enum").vals {
			vals = append(vals, formatLiteral(v.dump()))
		}
		return c.addRule(ruleName, "("+strings.Join(vals, " | ")+")")
	case (untyped || typ.isString("object")) && (schema.has("properties") || schema.has("additionalProperties") && !isTrue(schema.get("additionalProperties"))):
		keys, vals := properties(schema)
		return c.addRule(ruleName, c.objectRule(keys, vals, required(schema), name, schema.get("additionalProperties")))
	case (untyped || typ.isString("object") || typ.isString("string")) && schema.has("allOf"):
		return c.allOf(schema, name, ruleName)
	case (untyped || typ.isString("array")) && (schema.has("items") || schema.has("prefixItems")):
		return c.arrayRule(schema, name, ruleName)
	case (untyped || typ.isString("string")) && schema.has("pattern"):
		pat := schema.get("pattern")
		if pat.kind != 's' {
			c.errs = append(c.errs, "pattern must be a string")
			return ""
		}
		r, err := c.patternRule(pat.str, ruleName)
		if err != nil {
			c.errs = append(c.errs, err.Error())
		}
		return r
	case (untyped || typ.isString("string")) && uuidFormat.MatchString(format):
		n := format
		if ruleName == "root" {
			n = "root"
		}
		return c.addPrimitive(n, primitives["uuid"])
	case (untyped || typ.isString("string")) && hasFormat(format):
		return c.addRule(ruleName, c.addPrimitive(format+"-string", formats[format+"-string"]))
	case typ.isString("string") && (schema.has("minLength") || schema.has("maxLength")):
		char := c.addPrimitive("char", primitives["char"])
		lo, hi := intOr(schema.get("minLength"), 0), intOr(schema.get("maxLength"), math.MaxInt)
		return c.addRule(ruleName, `"\"" `+repetition(char, lo, hi, "")+` "\""`)
	case typ.isString("integer") && (schema.has("minimum") || schema.has("exclusiveMinimum") || schema.has("maximum") || schema.has("exclusiveMaximum")):
		return c.addRule(ruleName, "("+c.intRange(schema)+")")
	case schema.kind == 'o' && len(schema.keys) == 0 || typ.isString("object"):
		return c.addRule(ruleName, c.addPrimitive("object", primitives["object"]))
	case untyped && schema.kind == 'o':
		return c.addRule(ruleName, c.addPrimitive("value", primitives["value"]))
	}
	if typ == nil || typ.kind != 's' {
		c.errs = append(c.errs, "unrecognized schema: "+schema.dump())
		return ""
	}
	p, ok := primitives[typ.str]
	if !ok {
		c.errs = append(c.errs, "unrecognized schema: "+schema.dump())
		return ""
	}
	n := typ.str
	if ruleName == "root" {
		n = "root"
	}
	return c.addPrimitive(n, p)
}

func hasFormat(f string) bool {
	_, ok := formats[f+"-string"]
	return ok
}

func isTrue(v *jv) bool { return v != nil && v.kind == 'b' && v.b }

// intOr is v as an integer, or def when v is absent or not a number.
func intOr(v *jv, def int) int {
	if v == nil || v.kind != 'n' {
		return def
	}
	if i, err := v.num.Int64(); err == nil {
		return int(i)
	}
	f, _ := v.num.Float64()
	return int(f)
}

func properties(schema *jv) (keys []string, vals []*jv) {
	if p := schema.get("properties"); p != nil && p.kind == 'o' {
		return p.keys, p.vals
	}
	return nil, nil
}

func required(schema *jv) map[string]bool {
	req := map[string]bool{}
	if r := schema.get("required"); r != nil && r.kind == 'a' {
		for _, x := range r.vals {
			if x.kind == 's' {
				req[x.str] = true
			}
		}
	}
	return req
}

// repetition is build_repetition: item min..max times, with a separator.
func repetition(item string, lo, hi int, sep string) string {
	hasMax := hi != math.MaxInt
	if hi == 0 {
		return ""
	}
	if lo == 0 && hi == 1 {
		return item + "?"
	}
	if sep == "" {
		switch {
		case lo == 1 && !hasMax:
			return item + "+"
		case lo == 0 && !hasMax:
			return item + "*"
		}
		m := ""
		if hasMax {
			m = strconv.Itoa(hi)
		}
		return item + "{" + strconv.Itoa(lo) + "," + m + "}"
	}
	nhi := hi
	if hasMax {
		nhi = hi - 1
	}
	res := item + " " + repetition("("+sep+" "+item+")", max(lo-1, 0), nhi, "")
	if lo == 0 {
		res = "(" + res + ")?"
	}
	return res
}

func (c *converter) arrayRule(schema *jv, name, ruleName string) string {
	items := schema.get("items")
	if items == nil {
		items = schema.get("prefixItems")
	}
	if items.kind == 'a' {
		rule := `"[" space `
		for i, it := range items.vals {
			if i > 0 {
				rule += ` "," space `
			}
			rule += c.visit(it, sub(name, "tuple-"+strconv.Itoa(i)))
		}
		return c.addRule(ruleName, rule+` space "]"`)
	}
	item := c.visit(items, sub(name, "item"))
	lo := intOr(schema.get("minItems"), 0)
	hi := math.MaxInt
	if m := schema.get("maxItems"); m != nil && m.kind == 'n' {
		if i, err := m.num.Int64(); err == nil {
			hi = int(i)
		}
	}
	return c.addRule(ruleName, `"[" space `+repetition(item, lo, hi, `"," space`)+` space "]"`)
}

func (c *converter) allOf(schema *jv, name, ruleName string) string {
	var keys []string
	var vals []*jv
	req := map[string]bool{}
	enums := map[string]int{}
	var enumOrder []string
	var add func(comp *jv, isReq bool)
	add = func(comp *jv, isReq bool) {
		switch {
		case comp.has("$ref"):
			if t := c.refs[comp.get("$ref").str]; t != nil {
				add(t, isReq)
			}
		case comp.has("properties"):
			p := comp.get("properties")
			for i, k := range p.keys {
				keys, vals = append(keys, k), append(vals, p.vals[i])
				if isReq {
					req[k] = true
				}
			}
		case comp.has("enum"):
			for _, v := range comp.get("enum").vals {
				r := formatLiteral(v.dump())
				if _, ok := enums[r]; !ok {
					enumOrder = append(enumOrder, r)
				}
				enums[r]++
			}
		}
	}
	all := schema.get("allOf")
	for _, t := range all.vals {
		if t.has("anyOf") {
			for _, tt := range t.get("anyOf").vals {
				add(tt, false)
			}
		} else {
			add(t, true)
		}
	}
	if len(enums) > 0 {
		var inter []string
		slices.Sort(enumOrder)
		for _, r := range enumOrder {
			if enums[r] == len(all.vals) {
				inter = append(inter, r)
			}
		}
		if len(inter) > 0 {
			return c.addRule(ruleName, "("+strings.Join(inter, " | ")+")")
		}
	}
	return c.addRule(ruleName, c.objectRule(keys, vals, req, name, nil))
}
