package pgroles_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/pgroles"
)

// The env file holds what it was given, for a shell and for the next run:
// quoted values come back unchanged (a quote inside too), the file is the
// owner's only, and a password is reused only for the role's own user.
func TestEnvFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "roles.env")
	in := pgroles.EnvFile{
		pgroles.Gateway:  "postgres://seckill_ab_gateway:0123abcd@127.0.0.1:25432/seckill?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.crt",
		pgroles.Consumer: "host=db user='seckill_ab_consumer' password='it''s'",
	}
	require.NoError(t, in.Write(path, "first line\nsecond line"))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	got, err := pgroles.ReadEnvFile(path)
	require.NoError(t, err)
	require.Equal(t, in, got)

	require.Equal(t, "0123abcd", got.Password(pgroles.Gateway, "seckill_ab_gateway"))
	require.Empty(t, got.Password(pgroles.Gateway, "seckill_cd_gateway"), "another activity's role")
	require.Empty(t, got.Password(pgroles.Relay, "seckill_ab_relay"), "not in the file")

	// A key=value DSN as DSN writes it keeps its password too.
	kv, err := pgroles.DSN("host=db dbname=seckill sslmode=verify-full", "seckill_ab_relay", "0a1b2c")
	require.NoError(t, err)
	require.Equal(t, "0a1b2c", pgroles.EnvFile{pgroles.Relay: kv}.Password(pgroles.Relay, "seckill_ab_relay"))
	require.Empty(t, pgroles.EnvFile{pgroles.Relay: kv}.Password(pgroles.Relay, "seckill_cd_relay"))

	missing, err := pgroles.ReadEnvFile(filepath.Join(t.TempDir(), "none.env"))
	require.NoError(t, err)
	require.Empty(t, missing)
}

func TestEnvFileRefusesWhatItDidNotWrite(t *testing.T) {
	for name, line := range map[string]string{
		"no equals":       "SECKILL_PG_DSN_GATEWAY",
		"unclosed quote":  "SECKILL_PG_DSN_GATEWAY='postgres://x",
		"shell expansion": "SECKILL_PG_DSN_GATEWAY=$HOME",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "roles.env")
			require.NoError(t, os.WriteFile(path, []byte(line+"\n"), 0o600))
			_, err := pgroles.ReadEnvFile(path)
			require.Error(t, err)
		})
	}
}
