package cli

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/tlsutil"
)

const defaultEndpoints = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"

// ClientFlags are the flags of every command that talks to a cluster.
type ClientFlags struct {
	endpoints string
	Timeout   time.Duration
	output    string
	tokenFile string
	caFile    string
	certFile  string
	keyFile   string
	// HTTP2 speaks HTTP/2 to the nodes (h2c over plain TCP).
	HTTP2 bool
}

// Bind adds the flags to fs, defaulting from the environment.
func (f *ClientFlags) Bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.endpoints, "endpoints", EnvOr("FENCER_ENDPOINTS", defaultEndpoints), "comma-separated host:port or URLs of cluster members ($FENCER_ENDPOINTS)")
	fs.DurationVar(&f.Timeout, "timeout", 10*time.Second, "time limit of each request attempt")
	fs.StringVarP(&f.output, "output", "o", "text", "output format: text or json (errors too, on stderr)")
	// The TLS and ACL flags carry a prefix: in lock and kv commands --token
	// is a fencing token, and a key is what kv stores.
	fs.StringVar(&f.tokenFile, "auth-token-file", envFirst("FENCER_AUTH_TOKEN_FILE", "FENCER_TOKEN_FILE"), "file holding the ACL bearer token ($FENCER_AUTH_TOKEN_FILE; or the token itself in $FENCER_AUTH_TOKEN)")
	fs.StringVar(&f.caFile, "tls-ca", envFirst("FENCER_TLS_CA", "FENCER_CA"), "CA certificate for https endpoints ($FENCER_TLS_CA)")
	fs.StringVar(&f.certFile, "tls-cert", envFirst("FENCER_TLS_CERT", "FENCER_CERT"), "client certificate, if the cluster requires one ($FENCER_TLS_CERT)")
	fs.BoolVar(&f.HTTP2, "http2", os.Getenv("FENCER_HTTP2") == "1", "speak HTTP/2 to the nodes (h2c with prior knowledge over plain TCP) instead of HTTP/1.1 ($FENCER_HTTP2=1)")
	fs.StringVar(&f.keyFile, "tls-key", envFirst("FENCER_TLS_KEY", "FENCER_KEY"), "key of the client certificate ($FENCER_TLS_KEY)")
	// The names before the rename keep working for one release; they are
	// hidden from help and warn when used. So do their variables.
	deprecatedAlias(fs, "token-file", "auth-token-file")
	deprecatedAlias(fs, "ca", "tls-ca")
	deprecatedAlias(fs, "cert", "tls-cert")
	deprecatedAlias(fs, "key", "tls-key")
}

// deprecatedAlias adds the flag old, hidden, as another name for the flag
// current: both set the same variable, and using old prints a warning (see
// WarnDeprecated). pflag's MarkDeprecated would print its warning to stdout
// here, where it would corrupt -o json output.
func deprecatedAlias(fs *pflag.FlagSet, old, current string) {
	fs.Var(fs.Lookup(current).Value, old, "deprecated: use --"+current)
	_ = fs.MarkHidden(old)
	_ = fs.SetAnnotation(old, replacedBy, []string{current})
}

// replacedBy annotates a deprecated flag with the name that replaces it.
const replacedBy = "fencer-replaced-by"

// WarnDeprecated tells on stderr which deprecated flags the command line used.
func WarnDeprecated(cmd *cobra.Command, asJSON bool) {
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if r := f.Annotations[replacedBy]; len(r) == 1 {
			msg := fmt.Sprintf("--%s is deprecated and will be removed in the next release; use --%s", f.Name, r[0])
			if asJSON {
				b, _ := json.Marshal(map[string]string{"warning": msg}) // cannot fail
				fmt.Fprintf(cmd.ErrOrStderr(), "%s\n", b)
			} else {
				fmt.Fprintln(cmd.ErrOrStderr(), "fencer: warning: "+msg)
			}
		}
	})
}

// envFirst returns the value of the first of the variables that is set; the
// others are older names kept for compatibility.
func envFirst(names ...string) string {
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			return v
		}
	}
	return ""
}

// security returns the client options for TLS and the bearer token.
func (f *ClientFlags) security() ([]client.Option, error) {
	_, opts, err := f.Security()
	return opts, err
}

// Security reads the TLS and token flags: the TLS configuration (nil
// without --tls-ca or a certificate) for a caller that builds its own HTTP
// transport, and the client options that carry both.
func (f *ClientFlags) Security() (*tls.Config, []client.Option, error) {
	var opts []client.Option
	var cfg *tls.Config
	if f.caFile != "" || f.certFile != "" {
		var err error
		if cfg, err = tlsutil.ClientConfig(f.caFile, f.certFile, f.keyFile); err != nil {
			return nil, nil, err
		}
		opts = append(opts, client.WithTLS(cfg))
	}
	token := os.Getenv("FENCER_AUTH_TOKEN")
	if f.tokenFile != "" {
		data, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--auth-token-file: %w", err)
		}
		token = strings.TrimSpace(string(data))
	}
	if token != "" {
		opts = append(opts, client.WithBearerToken(token))
	}
	return cfg, opts, nil
}

// Validate checks the flags before any request is made.
func (f *ClientFlags) Validate() error {
	if f.output != "text" && f.output != "json" {
		return Usagef("--output %q: want text or json", f.output)
	}
	if f.Timeout <= 0 {
		return Usagef("--timeout %v: want a positive duration", f.Timeout)
	}
	if len(f.EndpointList()) == 0 {
		return Usagef("--endpoints is empty: want host:port of at least one cluster member")
	}
	return nil
}

// EndpointList splits --endpoints into its addresses.
func (f *ClientFlags) EndpointList() []string {
	var out []string
	for _, ep := range strings.Split(f.endpoints, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			out = append(out, ep)
		}
	}
	return out
}

// JSON reports whether -o json was asked for.
func (f *ClientFlags) JSON() bool { return f.output == "json" }

// ExtraClientOptions are added to every client the commands build. Tests set
// it (to drop renewals in flight, for one); the binary leaves it empty.
var ExtraClientOptions []client.Option

// client validates the flags and builds a client.
func (f *ClientFlags) Client() (*client.Client, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	opts, err := f.security()
	if err != nil {
		return nil, err
	}
	opts = append(opts, client.WithTimeout(f.Timeout))
	if f.HTTP2 {
		opts = append(opts, client.WithHTTP2())
	}
	return client.New(f.EndpointList(), append(opts, ExtraClientOptions...)...)
}

// WriteJSON writes v as one line of JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// TokenFlag is a --token, read as the API reads a Fencing-Token header: a
// positive decimal integer, so that "010" is refused rather than taken for
// octal 8, as pflag's Uint64 would.
type TokenFlag uint64

func (t *TokenFlag) String() string {
	if *t == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(*t), 10)
}

func (t *TokenFlag) Set(s string) error {
	v, ok := wire.ParseToken(s)
	if !ok {
		return errors.New("want a positive decimal integer without sign or leading zeros")
	}
	*t = TokenFlag(v)
	return nil
}

func (t *TokenFlag) Type() string { return "N" }
