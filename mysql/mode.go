package mysql

import (
	"github.com/flashsale/flashsale"
)

// The ModeBoard methods (Beat, Move, Parts) are sqlstore's, with this
// dialect's clock, share lock and upsert.
var _ flashsale.ModeBoard = (*Store)(nil)

// nowMS is the database's clock in unix milliseconds: leases are judged by
// one clock, whatever the instances' say.
const nowMS = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)"
