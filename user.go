package flashsale

// User is a guest as authenticated by the HTTP layer from a JWT.
type User struct {
	ID   string
	Tier Tier
}
