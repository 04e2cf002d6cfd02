# Strata's entry points. `make test` is what CI runs (.ci/run); it installs what the tests need
# beyond the Rust toolchain (see e2e/install-test-tools.sh) and then runs every test.

CARGO ?= cargo

.PHONY: test tools demo-tools crds lint fmt demo provider-repo

## Run every test of the workspace (installs kubectl / the Python kubernetes client if missing)
## twice: on the in-memory API test server, then the suites of the API test server, the operator,
## the translator and the end-to-end tests again against the real kube-apiserver + etcd that
## `make tools` unpacks (KUBEBUILDER_ASSETS mode), listing the tests skipped in each pass and why
## (a skip not listed in e2e/expected-skips.txt fails the run). The runner's own tests
## (e2e/runner-tests/) and the provider repository's (e2e/provider-repo-tests/) run first. One build serves both passes (test targets only: the examples
## are benchmarks, with no test, and `make lint` checks that they compile);
## e2e/run-test-binaries.py runs their test binaries
## TEST_JOBS at a time (they mostly wait: three at a time keep two cores busy; TEST_JOBS=1 runs
## them one by one). The two CLI suites, which start both binaries on their fixed default ports,
## never overlap; nor do the two chaos runs, the heaviest binaries, so that neither slows the
## other towards its deadlines.
ENVTEST_ASSETS ?= $(CURDIR)/target/tools/kube
TEST_BUILD := $(CURDIR)/target/test-build.json
TEST_JOBS ?= 3
test: tools
	python3 -m unittest discover -s $(CURDIR)/e2e/runner-tests -v
	python3 -m unittest discover -s $(CURDIR)/e2e/provider-repo-tests -v
	$(CARGO) test --workspace --lib --bins --tests --locked --no-run \
		--message-format=json-render-diagnostics > $(TEST_BUILD)
	$(CARGO) test --workspace --doc --locked
	python3 e2e/run-test-binaries.py $(TEST_BUILD) --jobs $(TEST_JOBS) \
		--times $(CURDIR)/target/test-times.json --first chaos \
		--serial "strata-operator test cli,strata-translator test cli" \
		--serial "strata-e2e test chaos" \
		--pass memory \
		--pass kube:strata-envtest,strata-runtime,strata-operator,strata-translator,strata-e2e \
		--env kube:KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) \
		--expected-skips $(CURDIR)/e2e/expected-skips.txt

## Install the test tools when missing: kubectl (Debian's kubernetes-client when none is on the
## PATH), Debian's kubectl 1.20 unpacked into target/tools/, etcd (Debian's etcd-server), the real
## kube-apiserver and the Python `kubernetes` client. See e2e/install-test-tools.sh.
tools:
	bash e2e/install-test-tools.sh

## Install what the demo needs when missing, and nothing else: kubectl. See
## e2e/install-demo-tools.sh.
demo-tools:
	bash e2e/install-demo-tools.sh

## The clusterctl provider repository (metadata.yaml, infrastructure-components.yaml, the
## cluster templates of templates/) in $(PROVIDER_REPO), and a clusterctl.yaml pointing the
## provider `strata` at it. Needs kubectl (its built-in kustomize) and PyYAML: `make tools`.
PROVIDER_REPO ?= $(CURDIR)/target/provider-repo
provider-repo: demo-tools
	python3 e2e/provider-repo.py $(PROVIDER_REPO)

## Regenerate crds/generated/*.yaml from the Rust types.
crds:
	$(CARGO) run --locked -p strata-crds --bin crdgen -- crds/generated

## Formatting and lints, as CI would want them, and no retired dependency back in Cargo.lock;
## the operator is linted once more alone, as users build it: without the benchmark's hooks
## (strata-e2e turns them on for the whole workspace build).
lint:
	$(CARGO) fmt --all -- --check
	bash e2e/check-dependencies.sh
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) clippy -p strata-operator --all-targets --locked -- -D warnings

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
