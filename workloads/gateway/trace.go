package gateway

// TraceParentHeader is the W3C Trace Context header a caller may send; the
// gateway keeps its trace-id with the reservation and the message.
const TraceParentHeader = "traceparent"

// TraceID is the trace-id of a W3C traceparent header
// ("00-<32 hex trace-id>-<16 hex parent-id>-<2 hex flags>"), or "" when the
// header is absent or not a valid traceparent: only 32 lowercase hex
// characters ever reach Redis and the message, whatever the caller sent.
// Versions after 00 are read by their first four fields, as the
// specification asks; version ff and all-zero ids are invalid.
func TraceID(traceparent string) string {
	const v00 = 55 // 2+1+32+1+16+1+2
	h := traceparent
	if len(h) < v00 || h[2] != '-' || h[35] != '-' || h[52] != '-' {
		return ""
	}
	version, trace, parent, flags := h[0:2], h[3:35], h[36:52], h[53:55]
	if !lowerHex(version) || version == "ff" || !lowerHex(trace) || !lowerHex(parent) || !lowerHex(flags) {
		return ""
	}
	if (version == "00" && len(h) != v00) || (len(h) > v00 && h[v00] != '-') {
		return ""
	}
	if allZero(trace) || allZero(parent) {
		return ""
	}
	return trace
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
