package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencer-io/fencer/fence"
	"github.com/fencer-io/fencer/fence/redisfence"
)

// Two holders of the lock "order:42" write through the fence; the one whose
// grant is older (token 41) arrives late and is refused by Redis itself.
func ExampleExec() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	scope := "example:order:42:" + os.Getenv("EXAMPLE_RUN") // the lock's name in real code

	// The newer holder (token 42) writes the order and its index entry.
	_, err := redisfence.Exec(ctx, rdb, scope, 42,
		redisfence.HSet(scope, "state", "paid", "by", "worker-b"),
		redisfence.Del(scope+":hold"))
	fmt.Println("token 42:", err)

	// The older holder wakes up from a pause and tries to write.
	_, err = redisfence.Exec(ctx, rdb, scope, 41, redisfence.HSet(scope, "state", "cancelled"))
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Println("token 41: refused, last accepted", stale.HighWater)
	}
	state, _ := rdb.HGet(ctx, scope, "state").Result()
	fmt.Println("state:", state)
}

// TestExampleExec runs ExampleExec against the test server (go test runs
// only examples that need nothing) and checks what it prints.
func TestExampleExec(t *testing.T) {
	addr := os.Getenv("FENCER_TEST_REDIS_ADDR")
	if addr == "" {
		if os.Getenv("FENCER_REQUIRE_REDIS") == "1" {
			t.Fatal("FENCER_TEST_REDIS_ADDR is unset but FENCER_REQUIRE_REDIS=1")
		}
		t.Skip("FENCER_TEST_REDIS_ADDR is unset; run the tests under scripts/with-redis.sh")
	}
	t.Setenv("REDIS_ADDR", addr)
	t.Setenv("EXAMPLE_RUN", strings.ReplaceAll(t.Name(), "/", "-")+fmt.Sprint(os.Getpid()))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	func() {
		defer func() { os.Stdout = stdout; w.Close() }()
		ExampleExec()
	}()
	out, _ := io.ReadAll(r)
	want := "token 42: <nil>\ntoken 41: refused, last accepted 42\nstate: paid\n"
	if string(out) != want {
		t.Fatalf("example printed\n%s\nwant\n%s", out, want)
	}
}
