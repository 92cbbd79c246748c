package redisx

import "strings"

// tagEscaper makes any name safe inside a Redis Cluster hash tag: the slot of "{x}" is the
// hash of x only when x holds no "}" (and a "{" would start a tag of its own in a key without
// one), so "{", "}" and the escape character itself are percent-encoded. The mapping is
// one-to-one: two names never share a tag.
var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// Tag is name as a hash tag, "{name}" with the braces and percent signs of name escaped, so
// every key built around it lands in the slot of the whole name on Redis Cluster, whatever
// the name holds.
func Tag(name string) string { return "{" + tagEscaper.Replace(name) + "}" }
