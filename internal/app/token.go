package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	fshttp "github.com/flashsale/flashsale/http"
	"github.com/golang-jwt/jwt/v5"
)

// Token prints a user JWT signed with the instance's secret, for trying
// the API without a platform's identity provider:
//
//	flashsale token --user alice [--tier gold] [--ttl 1h]
//
// The secret is FLASHSALE_JWT_SECRET, else the one serve generated in the
// data dir; the command never makes one, since a token no server accepts
// helps nobody.
func Token(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fset := NewFlagSet("token", args, stdout, stderr)
	user := fset.String("user", "", "the user ID (the sub claim): 1 to 64 characters of [A-Za-z0-9._@:-]")
	tier := fset.String("tier", "", "membership tier claim: basic, silver, gold or platinum")
	stays := fset.Int("stays-30d", -1, "nights stayed in the last 30 days claim (omitted when negative)")
	channel := fset.String("channel", "", "partner channel claim")
	ttl := fset.Duration("ttl", time.Hour, "how long the token is valid")
	issuer := fset.String("issuer", getenv("FLASHSALE_JWT_ISSUER"), "iss claim, which serve requires when FLASHSALE_JWT_ISSUER is set (FLASHSALE_JWT_ISSUER)")
	audience := fset.String("audience", getenv("FLASHSALE_JWT_AUDIENCE"), "aud claim, which serve requires when FLASHSALE_JWT_AUDIENCE is set (FLASHSALE_JWT_AUDIENCE)")
	dataDir := fset.String("data-dir", cmp.Or(getenv("FLASHSALE_DATA_DIR"), DataDirDefault), "where serve keeps its generated secret (FLASHSALE_DATA_DIR)")
	fset.Usage = func() {
		fmt.Fprintln(fset.Output(), "usage: flashsale token --user ID [--tier T] [--stays-30d N] [--channel C] [--ttl D]")
		fmt.Fprintln(fset.Output(), "prints a user JWT signed with FLASHSALE_JWT_SECRET (or the data dir's secret)")
		PrintFlags(fset, nil)
	}
	if err := ParseFlags(fset, args); err != nil {
		return err
	}
	switch {
	case *user == "":
		return UsageErrorf(fset, stderr, "--user is required: the user the token is for")
	case fset.NArg() > 0:
		return UsageErrorf(fset, stderr, "unexpected arguments %q", fset.Args())
	case !fshttp.ValidSubject(*user):
		return fmt.Errorf("--user must be 1 to 64 characters of [A-Za-z0-9._@:-]")
	case *tier != "" && flashsale.Tier(*tier).Rank() == 0:
		return fmt.Errorf("--tier must be basic, silver, gold or platinum")
	case *ttl <= 0 || *ttl > fshttp.MaxTokenLifetime:
		return UsageErrorf(fset, stderr, "--ttl must be positive and at most %v: the server refuses tokens that live longer", fshttp.MaxTokenLifetime)
	}
	secret := getenv("FLASHSALE_JWT_SECRET")
	if secret == "" {
		b, err := os.ReadFile(filepath.Join(*dataDir, "jwt_secret"))
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no secret to sign with: set FLASHSALE_JWT_SECRET, or run flashsale serve once with --data-dir %s", *dataDir)
		}
		if err != nil {
			return err
		}
		secret = strings.TrimSpace(string(b))
	}
	claims := jwt.MapClaims{"sub": *user, "exp": time.Now().Add(*ttl).Unix(), "iat": time.Now().Unix()}
	if *tier != "" {
		claims["tier"] = *tier
	}
	if *stays >= 0 {
		claims["stays_30d"] = *stays
	}
	if *channel != "" {
		claims["channel"] = *channel
	}
	if *issuer != "" {
		claims["iss"] = *issuer
	}
	if *audience != "" {
		claims["aud"] = *audience
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}
