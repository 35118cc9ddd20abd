package pgroles

import (
	"bufio"
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// EnvVar is the variable of a role's DSN in an env file written by
// `seckill activity roles`: SECKILL_PG_DSN_GATEWAY, …
func EnvVar(role string) string { return "SECKILL_PG_DSN_" + strings.ToUpper(role) }

// EnvFile is the DSN of each workload's role, by role, as `seckill activity
// roles -out FILE` keeps it: a file a shell can source (KEY='value' lines),
// read back so that a second run keeps the passwords.
type EnvFile map[string]string

// Password is the password of role's DSN when that DSN logs in as user
// ("" when the file has none for it): a run reuses it, so that running the
// command twice changes nothing.
func (f EnvFile) Password(role, user string) string {
	dsn := f[role]
	if dsn == "" {
		return ""
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil && u.User != nil && u.User.Username() == user {
			pw, _ := u.User.Password()
			return pw
		}
		return ""
	}
	// key=value: the login DSN appended last (passwords are hex: no quote).
	_, rest, ok := strings.Cut(dsn, " user='"+user+"' password='")
	if pw, tail, ok2 := strings.Cut(rest, "'"); ok && ok2 && strings.TrimSpace(tail) == "" {
		return pw
	}
	return ""
}

// ReadEnvFile reads path (a missing file is an empty EnvFile).
func ReadEnvFile(path string) (EnvFile, error) {
	b, err := os.ReadFile(path) //nolint:gosec // the user's own file, named on the command line
	if os.IsNotExist(err) {
		return EnvFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	out := EnvFile{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want KEY='value'", path, n)
		}
		val, err := unquote(v)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		for _, role := range Roles() {
			if k == EnvVar(role) {
				out[role] = val
			}
		}
	}
	return out, nil
}

// Write writes f to path atomically, readable by its owner only (it holds
// passwords), with a header saying how to use it.
func (f EnvFile) Write(path, header string) error {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(header), "\n") {
		b.WriteString("# " + l + "\n")
	}
	for _, role := range Roles() {
		if dsn, ok := f[role]; ok {
			fmt.Fprintf(&b, "%s=%s\n", EnvVar(role), quote(dsn))
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".roles-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
	if _, err := tmp.WriteString(b.String()); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// quote is v in single quotes for a POSIX shell.
func quote(v string) string { return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" }

// unquote reverses quote (a bare value without quotes or spaces is taken too).
func unquote(v string) (string, error) {
	if !strings.HasPrefix(v, "'") {
		if strings.ContainsAny(v, " \t'\"\\$`") {
			return "", fmt.Errorf("value %q: want it in single quotes", v)
		}
		return v, nil
	}
	var b strings.Builder
	for rest := v; rest != ""; {
		if !strings.HasPrefix(rest, "'") {
			if !strings.HasPrefix(rest, `\'`) {
				return "", fmt.Errorf("value %s: a quote is not closed", v)
			}
			b.WriteString("'")
			rest = rest[2:]
			continue
		}
		end := strings.Index(rest[1:], "'")
		if end < 0 {
			return "", fmt.Errorf("value %s: a quote is not closed", v)
		}
		b.WriteString(rest[1 : 1+end])
		rest = rest[end+2:]
	}
	return b.String(), nil
}
