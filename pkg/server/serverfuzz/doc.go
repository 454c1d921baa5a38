// Package serverfuzz holds the fuzz targets of package server's HTTP API
// (FuzzRunsAPI, FuzzWebhook). They live apart from server's own tests so
// that `go test -fuzz`, which instruments every linked package, does not
// build the embedded test MongoDB server those tests link. Their seeds run
// as ordinary tests.
package serverfuzz
