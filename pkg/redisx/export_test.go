package redisx

// ScriptOf exposes scriptOf to the external tests.
var ScriptOf = scriptOf

// HashOf is s's SHA1, for the external tests.
func HashOf(s *Script) string { return s.s.Hash() }
