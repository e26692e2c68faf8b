package grammar

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// objectRule is _build_object_rule: the required properties in order, then
// the optional ones (each optional, in order), then additional properties.
func (c *converter) objectRule(keys []string, vals []*jv, req map[string]bool, name string, additional *jv) string {
	var reqProps, optProps []string
	kv := map[string]string{}
	for i, k := range keys {
		valRule := c.visit(vals[i], sub(name, k))
		kv[k] = c.addRule(sub(name, k+"-kv"), formatLiteral((&jv{kind: 's', str: k}).dump())+` space ":" space `+valRule)
		if req[k] {
			reqProps = append(reqProps, k)
		} else {
			optProps = append(optProps, k)
		}
	}
	if isTrue(additional) || additional != nil && additional.kind == 'o' {
		subName := sub(name, "additional")
		var valRule string
		if additional.kind == 'o' {
			valRule = c.visit(additional, subName+"-value")
		} else {
			valRule = c.addPrimitive("value", primitives["value"])
		}
		var key string
		if len(keys) == 0 {
			key = c.addPrimitive("string", primitives["string"])
		} else {
			key = c.addRule(subName+"-k", c.notStrings(keys))
		}
		kv["*"] = c.addRule(subName+"-kv", key+` ":" space `+valRule)
		optProps = append(optProps, "*")
	}
	rule := `"{" space `
	for i, k := range reqProps {
		if i > 0 {
			rule += ` "," space `
		}
		rule += kv[k]
	}
	if len(optProps) > 0 {
		rule += " ("
		if len(reqProps) > 0 {
			rule += ` "," space ( `
		}
		for i := range optProps {
			if i > 0 {
				rule += " | "
			}
			rule += c.optionalRefs(optProps[i:], false, name, kv)
		}
		if len(reqProps) > 0 {
			rule += " )"
		}
		rule += " )?"
	}
	return rule + ` space "}"`
}

// optionalRefs is get_recursive_refs: ks[0], then the rest each optional.
func (c *converter) optionalRefs(ks []string, firstOptional bool, name string, kv map[string]string) string {
	if len(ks) == 0 {
		return ""
	}
	k := ks[0]
	comma := `( "," space ` + kv[k] + ` )`
	var res string
	switch {
	case firstOptional && k == "*":
		res = comma + "*"
	case firstOptional:
		res = comma + "?"
	case k == "*":
		res = kv[k] + " " + comma + "*"
	default:
		res = kv[k]
	}
	if len(ks) > 1 {
		res += " " + c.addRule(sub(name, k+"-rest"), c.optionalRefs(ks[1:], true, name, kv))
	}
	return res
}

// notStrings is _not_strings: a JSON string that is none of strs.
func (c *converter) notStrings(strs []string) string {
	type node struct {
		children map[byte]*node
		end      bool
	}
	root := &node{children: map[byte]*node{}}
	for _, s := range strs {
		n := root
		for i := 0; i < len(s); i++ {
			ch, ok := n.children[s[i]]
			if !ok {
				ch = &node{children: map[byte]*node{}}
				n.children[s[i]] = ch
			}
			n = ch
		}
		n.end = true
	}
	char := c.addPrimitive("char", primitives["char"])
	var out strings.Builder
	out.WriteString(`["] ( `)
	var walk func(n *node)
	walk = func(n *node) {
		var rejects []byte
		ks := make([]byte, 0, len(n.children))
		for b := range n.children {
			ks = append(ks, b)
		}
		slices.Sort(ks)
		for i, b := range ks {
			rejects = append(rejects, b)
			if i > 0 {
				out.WriteString(" | ")
			}
			out.WriteString("[" + string(b) + "]")
			ch := n.children[b]
			if len(ch.children) > 0 {
				out.WriteString(" (")
				walk(ch)
				out.WriteString(")")
			} else if ch.end {
				out.WriteString(" " + char + "+")
			}
		}
		if len(ks) > 0 {
			out.WriteString(` | [^"` + string(rejects) + "] " + char + "*")
		}
	}
	walk(root)
	out.WriteString(" )")
	if !root.end {
		out.WriteString("?")
	}
	out.WriteString(` ["]`)
	return out.String()
}

// intRange is the integer minimum/maximum rule (build_min_max_int).
func (c *converter) intRange(schema *jv) string {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if v := schema.get("minimum"); v != nil {
		lo = int64(intOr(v, 0))
	} else if v := schema.get("exclusiveMinimum"); v != nil {
		lo = int64(intOr(v, 0)) + 1
	}
	if v := schema.get("maximum"); v != nil {
		hi = int64(intOr(v, 0))
	} else if v := schema.get("exclusiveMaximum"); v != nil {
		hi = int64(intOr(v, 0)) - 1
	}
	var b strings.Builder
	minMaxInt(lo, hi, &b, 16, true)
	return b.String()
}

func digitRange(out *strings.Builder, from, to byte) {
	out.WriteString("[")
	out.WriteByte(from)
	if from != to {
		out.WriteString("-")
		out.WriteByte(to)
	}
	out.WriteString("]")
}

func moreDigits(out *strings.Builder, lo, hi int) {
	out.WriteString("[0-9]")
	if lo == hi && lo == 1 {
		return
	}
	out.WriteString("{" + strconv.Itoa(lo))
	if hi != lo {
		out.WriteString(",")
		if hi != math.MaxInt {
			out.WriteString(strconv.Itoa(hi))
		}
	}
	out.WriteString("}")
}

// uniformRange matches the decimal numbers from..to of the same length.
func uniformRange(out *strings.Builder, from, to string) {
	i := 0
	for i < len(from) && i < len(to) && from[i] == to[i] {
		i++
	}
	if i > 0 {
		out.WriteString(`"` + from[:i] + `"`)
	}
	if i >= len(from) || i >= len(to) {
		return
	}
	if i > 0 {
		out.WriteString(" ")
	}
	subLen := len(from) - i - 1
	if subLen == 0 {
		out.WriteString("[" + from[i:i+1] + "-" + to[i:i+1] + "]")
		return
	}
	fromSub, toSub := from[i+1:], to[i+1:]
	zeros, nines := strings.Repeat("0", subLen), strings.Repeat("9", subLen)
	toReached := false
	out.WriteString("(")
	if fromSub == zeros {
		digitRange(out, from[i], to[i]-1)
		out.WriteString(" ")
		moreDigits(out, subLen, subLen)
	} else {
		out.WriteString("[" + from[i:i+1] + "] (")
		uniformRange(out, fromSub, nines)
		out.WriteString(")")
		if from[i] < to[i]-1 {
			out.WriteString(" | ")
			if toSub == nines {
				digitRange(out, from[i]+1, to[i])
				toReached = true
			} else {
				digitRange(out, from[i]+1, to[i]-1)
			}
			out.WriteString(" ")
			moreDigits(out, subLen, subLen)
		}
	}
	if !toReached {
		out.WriteString(" | ")
		digitRange(out, to[i], to[i])
		out.WriteString(" ")
		uniformRange(out, zeros, toSub)
	}
	out.WriteString(")")
}
