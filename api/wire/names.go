package wire

// Lock names, keys and ACL prefixes share one alphabet; node ids have their
// own, without ':' (ids become file names and certificate names). Both are
// checked by a loop rather than a regular expression: ValidName runs on
// every request, and a regexp cost a few percent of the leader's CPU.
const (
	// MaxNameLen is the longest lock name or key.
	MaxNameLen = 200
	// NameChars is the alphabet of lock names, keys and ACL prefixes.
	NameChars = "[A-Za-z0-9._:-]"
	// NameRule describes a valid name, for error messages.
	NameRule = "1-200 of " + NameChars + ", not . or .."
	// MaxNodeIDLen is the longest node id.
	MaxNodeIDLen = 64
	// NodeIDRule describes a valid node id, for error messages.
	NodeIDRule = "1-64 of [A-Za-z0-9._-]"
)

// ValidName reports whether s is a valid lock name or key: NameRule. "." and
// ".." are refused because proxies and clients rewrite them as path
// segments.
func ValidName(s string) bool { return s != "." && s != ".." && ValidNamePrefix(s) }

// ValidNamePrefix reports whether s can begin a name (an ACL prefix): 1-200
// of NameChars, "." and ".." included.
func ValidNamePrefix(s string) bool { return validChars(s, MaxNameLen, true) }

// ValidNodeID reports whether s is a valid node id: NodeIDRule.
func ValidNodeID(s string) bool { return validChars(s, MaxNodeIDLen, false) }

func validChars(s string, max int, colon bool) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		case c == ':' && colon:
		default:
			return false
		}
	}
	return true
}
