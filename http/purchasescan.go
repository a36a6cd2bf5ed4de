package http

// scanPurchase is the purchase body's fast path: the bodies real clients
// send ({"token":"…"}, perhaps with check_in, nights and rooms) are read
// here without reflection, a fifth of the sold-out answer's own CPU when
// go-json-experiment read them all. It accepts only what the strict
// decoder (decodeJSON into purchaseWire) accepts with the same result, and
// gives up (false) on everything else, which then goes to that decoder for
// its verdict and its message: escapes, non-ASCII or control bytes in a
// string, null, numbers other than short integers, unknown, case-variant
// or repeated names, trailing data, bad syntax. FuzzScanPurchase holds it
// to that against the decoder.
func scanPurchase(b []byte) (f purchaseFields, ok bool) {
	s := purchaseScanner{b: b}
	s.space()
	if !s.eat('{') {
		return f, false
	}
	s.space()
	if s.eat('}') {
		return f, s.end()
	}
	var seen uint8
	for {
		name, ok := s.raw()
		if !ok {
			return f, false
		}
		s.space()
		if !s.eat(':') {
			return f, false
		}
		s.space()
		var bit uint8
		switch string(name) { // compared, not copied
		case "token":
			bit = 1
			f.Token, ok = s.str()
		case "check_in":
			bit = 2
			f.CheckIn, ok = s.str()
		case "nights":
			bit = 4
			f.Nights, ok = s.int()
			f.HasNights = true
		case "rooms":
			bit = 8
			f.Rooms, ok = s.int()
			f.HasRooms = true
		default:
			return f, false
		}
		if !ok || seen&bit != 0 {
			return f, false
		}
		seen |= bit
		s.space()
		if s.eat('}') {
			return f, s.end()
		}
		if !s.eat(',') {
			return f, false
		}
		s.space()
	}
}

// purchaseFields is a purchase body as sent, before its bounds are checked.
type purchaseFields struct {
	Token, CheckIn      string
	Nights, Rooms       int
	HasNights, HasRooms bool
	// Slot (or departure) and roomsName (rooms given as quantity or
	// seats) are read by the strict decoder alone: a slot or seats sale's
	// purchases take the slower path.
	Slot      string
	roomsName string
}

type purchaseScanner struct {
	b []byte
	i int
}

func (s *purchaseScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

func (s *purchaseScanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only whitespace follows.
func (s *purchaseScanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

// str reads a string of printable ASCII without escapes.
func (s *purchaseScanner) str() (string, bool) {
	v, ok := s.raw()
	return string(v), ok
}

// raw is str's bytes, still in the body: a field's name is only compared.
func (s *purchaseScanner) raw() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return nil, false
		}
	}
	return nil, false
}

// int reads a JSON integer of at most nine digits: no fraction, exponent
// or leading zero, so the decoder would read the same number.
func (s *purchaseScanner) int() (int, bool) {
	neg := s.eat('-')
	start, n := s.i, 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		n = n*10 + int(s.b[s.i]-'0')
		s.i++
	}
	digits := s.i - start
	if digits == 0 || digits > 9 || (digits > 1 && s.b[start] == '0') {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}
