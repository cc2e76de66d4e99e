module github.com/shinken-rl/shinken/deploy/kubernetes/test

go 1.26.0
