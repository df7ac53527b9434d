// Package client is delayq's Go SDK. It speaks the HTTP v1 API.
//
// Client is the low-level client with one method per endpoint; it fails
// over between server addresses and retries what is safe to retry. Producer
// and Consumer, built on it, are what most programs need.
package client
