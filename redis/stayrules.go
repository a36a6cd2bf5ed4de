package redis

import (
	"strconv"

	"github.com/flashsale/flashsale"
)

// ruleFields are a sale's stay rules as the meta hash keeps them
// (stayrules.lua): field 'r<night>', value '<min> <max> <flags>', for each
// night that has any.
func ruleFields(rules []flashsale.StayRules) []any {
	var f []any
	for i, r := range rules {
		if !r.Set() {
			continue
		}
		flags := 0
		if r.ClosedToArrival {
			flags |= 1
		}
		if r.ClosedToDeparture {
			flags |= 2
		}
		if r.StopSell {
			flags |= 4
		}
		f = append(f, "r"+strconv.Itoa(i), strconv.Itoa(r.MinStay)+" "+strconv.Itoa(r.MaxStay)+" "+strconv.Itoa(flags))
	}
	return f
}

// ruleErrors are the rules reserve.lua names, by name.
var ruleErrors = map[string]*flashsale.Error{
	flashsale.EStopSell:          flashsale.ErrStopSell,
	flashsale.EClosedToArrival:   flashsale.ErrClosedToArrival,
	flashsale.EMinStay:           flashsale.ErrMinStay,
	flashsale.EMaxStay:           flashsale.ErrMaxStay,
	flashsale.EClosedToDeparture: flashsale.ErrClosedToDeparture,
}

// ruleError reads reserve.lua's {RULE, rule, night}, or nil for a reply
// that is not one.
func ruleError(reply []any) error {
	if len(reply) != 3 {
		return nil
	}
	name, _ := reply[1].(string)
	night, _ := reply[2].(int64)
	rule, ok := ruleErrors[name]
	if !ok {
		return nil
	}
	return &flashsale.StayError{Rule: rule, Night: int(night)}
}
