module github.com/hetsched/hetsched

go 1.26.8

require (
	github.com/cockroachdb/datadriven v1.0.3
	github.com/google/go-cmp v0.7.0
	github.com/spf13/cobra v1.10.2
	pgregory.net/rapid v1.3.0
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
)
