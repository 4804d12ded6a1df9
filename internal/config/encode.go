package config

import (
	"bytes"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Redacted stands in for a secret that YAML cannot name otherwise: an
// admin token or a sticky secret the file held itself rather than
// through a ${VAR}.
const Redacted = "<redacted>"

// YAML writes c as a config file that Parse reads back as the same
// configuration (helios config prints it): every key the file held and
// every key whose default is not zero or off, with ${VAR} references
// expanded and each $ written as $$; relative paths as resolved (against
// the config file's directory). The admin token and sticky secrets are
// written as the ${VAR} reference they came from, or as Redacted when the
// file held the secret itself (which Parse then refuses as too short: put
// the secret back).
func (c *Config) YAML() ([]byte, error) { return c.encode(true) }

// encode writes c as YAML; redact false writes the admin token as it is.
func (c *Config) encode(redact bool) ([]byte, error) {
	e := encoder{meta: c.meta, redact: redact}
	root, _ := e.value(reflect.ValueOf(c).Elem(), "")
	if root == nil {
		root = &yaml.Node{Kind: yaml.MappingNode}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// secretPaths are the keys whose values YAML never shows, list indexes
// left out (isSecret).
var secretPaths = []string{"admin.token", "upstreams.sticky.secret"}

// isSecret reports whether the key at path is one of secretPaths.
func isSecret(path string) bool {
	var b strings.Builder
	for {
		i := strings.IndexByte(path, '[')
		if i < 0 {
			b.WriteString(path)
			break
		}
		b.WriteString(path[:i])
		j := strings.IndexByte(path[i:], ']')
		if j < 0 {
			return false
		}
		path = path[i+j+1:]
	}
	return slices.Contains(secretPaths, b.String())
}

// encoder turns a Config into YAML nodes.
type encoder struct {
	meta   *meta
	redact bool
}

// scalar returns a scalar node, with $ doubled in strings so that
// environment expansion gives them back as they are.
func scalar(tag, value string) *yaml.Node {
	if tag == "!!str" {
		value = strings.ReplaceAll(value, "$", "$$")
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}

// secret returns the node of the secret at path: the one ${VAR} it
// came from, written as in the file, or Redacted.
func (e *encoder) secret(path, value string) *yaml.Node {
	if line, ok := e.meta.keyLine(path); ok {
		if refs := e.meta.env[line]; len(refs) == 1 && refs[0].value == value {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: refs[0].text, Style: yaml.DoubleQuotedStyle}
		}
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: Redacted}
}

// value returns the YAML node of v, at key path path, or nil when v is
// zero and the file did not hold it (so that an explicit 0 stays one, and
// an absent block stays absent).
func (e *encoder) value(v reflect.Value, path string) (*yaml.Node, bool) {
	if v.IsZero() && !e.meta.present(path) && v.Kind() != reflect.Struct {
		return nil, false
	}
	switch {
	case v.Type() == durationType:
		return scalar("!!str", Duration(v.Int()).String()), true
	case v.Kind() == reflect.Pointer:
		return e.value(v.Elem(), path)
	case v.Kind() == reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, f := range yamlFields(v.Type()) {
			if child, ok := e.value(v.Field(f.index), childPath(path, f.name)); ok {
				n.Content = append(n.Content, scalar("!!str", f.name), child)
			}
		}
		return n, len(n.Content) > 0 || e.meta.present(path)
	case v.Kind() == reflect.Slice:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for i := range v.Len() {
			child, ok := e.value(v.Index(i), indexPath(path, i))
			if !ok {
				child = &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			}
			n.Content = append(n.Content, child)
		}
		if v.Len() == 0 || v.Type().Elem().Kind() == reflect.String {
			n.Style = yaml.FlowStyle // [] and [a, b]
		}
		return n, true
	case v.Kind() == reflect.Map:
		n := &yaml.Node{Kind: yaml.MappingNode}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			child, _ := e.value(v.MapIndex(k), childPath(path, k.String()))
			if child == nil {
				child = scalar("!!str", "")
			}
			n.Content = append(n.Content, scalar("!!str", k.String()), child)
		}
		return n, true
	case v.Kind() == reflect.String:
		if e.redact && v.String() != "" && isSecret(path) {
			return e.secret(path, v.String()), true
		}
		return scalar("!!str", v.String()), true
	case v.Kind() == reflect.Int || v.Kind() == reflect.Int64:
		return scalar("!!int", strconv.FormatInt(v.Int(), 10)), true
	case v.Kind() == reflect.Float64:
		return scalar("!!float", strconv.FormatFloat(v.Float(), 'g', -1, 64)), true
	case v.Kind() == reflect.Bool:
		return scalar("!!bool", strconv.FormatBool(v.Bool())), true
	}
	panic("config: encoding a field of kind " + v.Kind().String())
}
