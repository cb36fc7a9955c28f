package edgeserver

import (
	"log/slog"

	"github.com/edgelink/edgelink/edge/unlock"
)

// newGate builds the password gate cfg asks for: its keys from
// cfg.Unlock.Keys, else the key file, else a random key of this process
// (logged: its cookies hold on this edge only, until it restarts).
func newGate(cfg Config, log *slog.Logger) (*unlock.Gate, error) {
	ucfg := cfg.Unlock
	switch {
	case ucfg.Keys != nil:
	case cfg.UnlockKeysFile != "":
		keys, err := unlock.LoadKeys(cfg.UnlockKeysFile)
		if err != nil {
			return nil, err // names the file and the line, never a key
		}
		ucfg.Keys = keys
	default:
		log.Warn("no --unlock-keys: password-protected links' cookies are signed with a random key of this process, so another edge (or this one restarted) asks the password again")
	}
	g := unlock.New(ucfg)
	log.Info("password gate", "keys", g.Keys().Names(), "cookie_ttl", g.CookieTTL().String())
	return g, nil
}
