// Command apikey makes a new API key for the gateway: it prints the key (give it to the client,
// once) on stderr and the line for the keys file (name, hash, scopes) on stdout.
//
//	go run ./gateway/cmd/apikey ci reservations:write locks >> deploy/secrets/api-keys
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/vigil-dev/vigil/gateway"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: apikey <name> <scope>...   (scopes: see docs/SECURITY.md)")
		os.Exit(2)
	}
	key, hash := gateway.NewAPIKey()
	line := os.Args[1] + " " + hash + " " + strings.Join(os.Args[2:], ",")
	if _, err := gateway.ParseAPIKeys(line); err != nil {
		fmt.Fprintln(os.Stderr, "apikey:", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "key for %s (shown once; the gateway keeps only its hash): %s\n", os.Args[1], key)
	fmt.Println(line)
}
