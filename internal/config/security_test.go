package config

import (
	"strings"
	"testing"
)

func TestCheckExposure(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		modify  func(c *Config)
		wantErr string // "" for none
		warn    bool
	}{
		{"defaults on loopback", func(c *Config) {}, "", false},
		{"localhost", func(c *Config) { c.HTTPAddr = "localhost:7480"; c.BeanstalkAddr = "[::1]:11300" }, "", false},
		{"open beyond loopback", func(c *Config) { c.HTTPAddr = ":7480" }, "--insecure-listen", false},
		{"open beanstalk beyond loopback", func(c *Config) { c.BeanstalkAddr = "0.0.0.0:11300" }, "--insecure-listen", false},
		{"opted out", func(c *Config) { c.HTTPAddr = ":7480"; c.InsecureListen = true }, "", true},
		{"tokens, http beyond loopback", func(c *Config) { c.AuthFile = "a.json"; c.HTTPAddr = ":7480" }, "", true},
		{"tokens, plain beanstalk beyond loopback", func(c *Config) { c.AuthFile = "a.json"; c.BeanstalkAddr = ":11300" }, "--beanstalk-insecure-listen", false},
		{"tokens, mutual TLS beanstalk", func(c *Config) {
			c.AuthFile = "a.json"
			c.BeanstalkAddr = ":11300"
			c.TLSCert, c.TLSKey, c.TLSClientCA = "c", "k", "ca"
		}, "", false},
		{"tokens, beanstalk opted out", func(c *Config) { c.Auth = `{}`; c.BeanstalkAddr = ":11300"; c.BeanstalkInsecureListen = true }, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.modify(&c)
			warns, err := c.CheckExposure()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want one naming %q", err, tt.wantErr)
			}
			if (len(warns) > 0) != tt.warn {
				t.Fatalf("warnings = %q", warns)
			}
		})
	}
}

func TestSecurityValidate(t *testing.T) {
	t.Parallel()
	c := Default()
	c.TLSCert = "cert.pem"
	c.TLSClientCA = "ca.pem"
	c.MaxTopics = -1
	err := c.Validate()
	for _, field := range []string{"tls-cert", "max-topics"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate = %v, want it to name %s", err, field)
		}
	}
}
