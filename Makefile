# Strata's entry points. `make test` is what CI runs (.ci/run); it installs what the tests need
# beyond the Rust toolchain (see e2e/install-test-tools.sh) and then runs every test.

CARGO ?= cargo

.PHONY: test tools demo-tools crds lint fmt demo

## Run every test of the workspace (installs kubectl / the Python kubernetes client if missing),
## then the suites of the API test server, the operator, the translator and the end-to-end tests
## a second time against the real kube-apiserver + etcd that `make tools` unpacks
## (KUBEBUILDER_ASSETS mode), listing the tests skipped there and why. The second run names the
## four packages in one command: their features then unify as in the workspace build, so no
## dependency is compiled a second time.
ENVTEST_ASSETS ?= $(CURDIR)/target/tools/kube
ENVTEST_SKIPS := $(CURDIR)/target/envtest-real-server-skips.txt
test: tools
	$(CARGO) test --workspace --all-targets --locked
	$(CARGO) test --workspace --doc --locked
	@echo "== strata-envtest, strata-operator, strata-translator and strata-e2e on kube-apiserver + etcd (KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS))"
	@rm -f $(ENVTEST_SKIPS)
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) STRATA_ENVTEST_SKIP_LOG=$(ENVTEST_SKIPS) \
		$(CARGO) test -p strata-envtest -p strata-operator -p strata-translator -p strata-e2e \
		--all-targets --locked
	@touch $(ENVTEST_SKIPS); \
		echo "== on kube-apiserver: $$(sort -u $(ENVTEST_SKIPS) | wc -l) tests skipped:"; \
		sort -u $(ENVTEST_SKIPS) | sed 's/^/  - /'

## Install the test tools when missing: kubectl (Debian's kubernetes-client when none is on the
## PATH), Debian's kubectl 1.20 unpacked into target/tools/, etcd (Debian's etcd-server), the real
## kube-apiserver and the Python `kubernetes` client. See e2e/install-test-tools.sh.
tools:
	bash e2e/install-test-tools.sh

## Install what the demo needs when missing, and nothing else: kubectl. See
## e2e/install-demo-tools.sh.
demo-tools:
	bash e2e/install-demo-tools.sh

## Regenerate crds/generated/*.yaml from the Rust types.
crds:
	$(CARGO) run --locked -p strata-crds --bin crdgen -- crds/generated

## Formatting and lints, as CI would want them, and no retired dependency back in Cargo.lock.
lint:
	$(CARGO) fmt --all -- --check
	bash e2e/check-dependencies.sh
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

fmt:
	$(CARGO) fmt --all

## The demo (no cluster, no cloud): the API test server, the ARM emulator, the CAPI-core stand-in,
## strata-translator and strata-operator in one process; applies samples/capi/default-cluster.yaml,
## shows the cloud CRs converging, prints a summary and how to explore, serves until Ctrl-C or
## SIGTERM. Installs kubectl first when it is missing (only that: `make demo-tools`).
## Options: make demo DEMO_ARGS="--exit-when-ready".
DEMO_ARGS ?=
demo: demo-tools
	$(CARGO) run --release --locked -p strata-e2e --bin strata-demo -- $(DEMO_ARGS)
