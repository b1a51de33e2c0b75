package cardinality

// Thresholds of LooksLikeID.
const (
	// minHexRun is the shortest run of hex digits taken for an id (a
	// trace id is 32, a span id 16).
	minHexRun = 16
	// minDigitRun is the shortest run of decimal digits taken for an id
	// (user or order numbers, Unix timestamps).
	minDigitRun = 8
	// minTokenRun is the shortest run of letters and digits, with at least
	// minTokenDigits digits, taken for a random token (ULIDs are 26).
	minTokenRun    = 20
	minTokenDigits = 3
)

// LooksLikeID reports whether a label value looks like an identifier
// rather than a category: a UUID, or a run of at least 16 hex digits, 8
// decimal digits or 20 letters and digits (3 of them digits) anywhere in
// it, so "req-5f0c9a1e2b3d4c5e6f708192" and "user_12345678" count, and
// "10.0.0.1:8080", "GET" or "llama-3.1-8b-instruct" do not.
func LooksLikeID(v string) bool {
	if isUUID(v) {
		return true
	}
	hex, digits, token, tokenDigits := 0, 0, 0, 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		isDigit := c >= '0' && c <= '9'
		isHex := isDigit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
		isAlnum := isDigit || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		hex = run(hex, isHex)
		digits = run(digits, isDigit)
		if isAlnum {
			token++
			if isDigit {
				tokenDigits++
			}
		} else {
			token, tokenDigits = 0, 0
		}
		if hex >= minHexRun || digits >= minDigitRun || (token >= minTokenRun && tokenDigits >= minTokenDigits) {
			return true
		}
	}
	return false
}

func run(n int, in bool) int {
	if in {
		return n + 1
	}
	return 0
}

// isUUID: 8-4-4-4-12 hex digits.
func isUUID(v string) bool {
	if len(v) != 36 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// idShare is the share of values that look like ids.
func idShare(values []string) float64 {
	if len(values) == 0 {
		return 0
	}
	n := 0
	for _, v := range values {
		if LooksLikeID(v) {
			n++
		}
	}
	return float64(n) / float64(len(values))
}
