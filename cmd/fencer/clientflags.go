package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/internal/tlsutil"
)

const defaultEndpoints = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"

// envBlockRenewAfter is test-only: when set to a duration, every renewal the
// client sends that long or longer after it was built fails, as if the
// network dropped it. Tests use it to make "fencer exec" lose its lease.
const envBlockRenewAfter = "FENCER_TEST_BLOCK_RENEW_AFTER"

// clientFlags are the flags of every command that talks to a cluster.
type clientFlags struct {
	endpoints string
	timeout   time.Duration
	output    string
	tokenFile string
	caFile    string
	certFile  string
	keyFile   string
}

func (f *clientFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.endpoints, "endpoints", envOr("FENCER_ENDPOINTS", defaultEndpoints), "comma-separated host:port or URLs of cluster members ($FENCER_ENDPOINTS)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "time limit of each request attempt")
	fs.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	// --token is taken: in lock and kv commands it is the fencing token.
	fs.StringVar(&f.tokenFile, "token-file", os.Getenv("FENCER_TOKEN_FILE"), "file holding the ACL bearer token ($FENCER_TOKEN_FILE; or the token itself in $FENCER_AUTH_TOKEN)")
	fs.StringVar(&f.caFile, "ca", os.Getenv("FENCER_CA"), "CA certificate for https endpoints ($FENCER_CA)")
	fs.StringVar(&f.certFile, "cert", os.Getenv("FENCER_CERT"), "client certificate, if the cluster requires one ($FENCER_CERT)")
	fs.StringVar(&f.keyFile, "key", os.Getenv("FENCER_KEY"), "client key ($FENCER_KEY)")
}

// security returns the client options for TLS and the bearer token.
func (f *clientFlags) security() ([]client.Option, error) {
	var opts []client.Option
	if f.caFile != "" || f.certFile != "" {
		cfg, err := tlsutil.ClientConfig(f.caFile, f.certFile, f.keyFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.WithTLS(cfg))
	}
	token := os.Getenv("FENCER_AUTH_TOKEN")
	if f.tokenFile != "" {
		data, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(data))
	}
	if token != "" {
		opts = append(opts, client.WithBearerToken(token))
	}
	return opts, nil
}

func (f *clientFlags) validate() error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("--output %q: want text or json", f.output)
	}
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %v: want a positive duration", f.timeout)
	}
	if len(f.endpointList()) == 0 {
		return errors.New("--endpoints is empty: want host:port of at least one cluster member")
	}
	return nil
}

func (f *clientFlags) endpointList() []string {
	var out []string
	for _, ep := range strings.Split(f.endpoints, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			out = append(out, ep)
		}
	}
	return out
}

func (f *clientFlags) json() bool { return f.output == "json" }

// client validates the flags and builds a client.
func (f *clientFlags) client() (*client.Client, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	opts, err := f.security()
	if err != nil {
		return nil, err
	}
	opts = append(opts, client.WithTimeout(f.timeout))
	if v := envOr(envBlockRenewAfter, ""); v != "" {
		after, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("$%s %q: %w", envBlockRenewAfter, v, err)
		}
		opts = append(opts, client.WithHTTPClient(&http.Client{Transport: &renewBlocker{
			next:  http.DefaultTransport,
			after: time.Now().Add(after),
		}}))
	}
	return client.New(f.endpointList(), opts...)
}

// renewBlocker fails renewals sent after a point in time (test-only).
type renewBlocker struct {
	next  http.RoundTripper
	after time.Time
}

func (b *renewBlocker) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/renew") && !time.Now().Before(b.after) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("renewal dropped by $%s", envBlockRenewAfter)
	}
	return b.next.RoundTrip(req)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
