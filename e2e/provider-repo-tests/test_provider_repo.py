"""The clusterctl provider repository `make provider-repo` writes (e2e/provider-repo.py), checked
against clusterctl's provider contract: the layout, metadata.yaml's release series and contract,
the provider label on every component, one namespace for the namespaced ones, the contract labels
of the infrastructure CRDs, and templates that render with clusterctl's variable substitution
(`${VAR}`, `${VAR:=default}`, `${VAR:-default}`) to what the rest of the suite proves: Strata's
default flavour renders to samples/capi/default-cluster.yaml. Needs kubectl and PyYAML."""

import os
import re
import subprocess
import sys
import tempfile
import unittest

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GENERATOR = os.path.join(REPO, "e2e", "provider-repo.py")
RELEASE = os.path.join("infrastructure-strata", "v0.1.0")
# clusterctl's own pattern for the variables of a YAML file (its `variables` listing).
VARIABLE = re.compile(r"\$\{\s*([A-Za-z0-9_]+)\s*(?:(:?[=-])([^}]*))?\}")


class MissingVariable(Exception):
    pass


def render(text, values):
    """clusterctl's substitution: `${VAR}` must be given; `${VAR:=d}` / `${VAR:-d}` fall back to d
    when VAR is unset or empty, `${VAR=d}` / `${VAR-d}` when it is unset."""
    def one(m):
        name, op, default = m.group(1), m.group(2), m.group(3)
        value = values.get(name)
        if op is None:
            if value is None:
                raise MissingVariable(name)
            return value
        if value is None or (op.startswith(":") and value == ""):
            return default
        return value
    return VARIABLE.sub(one, text)


def docs(text):
    return [d for d in yaml.safe_load_all(text) if d]


class ProviderRepository(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        subprocess.run([sys.executable, GENERATOR, cls.tmp.name], check=True,
                       capture_output=True, timeout=120)
        cls.release = os.path.join(cls.tmp.name, RELEASE)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def read(self, name):
        with open(os.path.join(self.release, name)) as f:
            return f.read()

    def test_layout_and_metadata(self):
        files = sorted(os.listdir(self.release))
        self.assertIn("metadata.yaml", files)
        self.assertIn("infrastructure-components.yaml", files)
        self.assertIn("cluster-template.yaml", files)
        meta = yaml.safe_load(self.read("metadata.yaml"))
        self.assertEqual(meta["apiVersion"], "clusterctl.cluster.x-k8s.io/v1alpha3")
        self.assertEqual(meta["kind"], "Metadata")
        self.assertEqual(meta["releaseSeries"], [{"major": 0, "minor": 1, "contract": "v1beta1"}])
        with open(os.path.join(self.tmp.name, "clusterctl.yaml")) as f:
            config = yaml.safe_load(f)
        self.assertEqual(config["providers"], [{
            "name": "strata", "type": "InfrastructureProvider",
            "url": "file://" + os.path.join(self.release, "infrastructure-components.yaml")}])

    def components(self, values=None):
        return docs(render(self.read("infrastructure-components.yaml"), values or {}))

    def test_components_follow_the_provider_contract(self):
        objs = self.components()
        contracts = {s["contract"] for s in yaml.safe_load(self.read("metadata.yaml"))["releaseSeries"]}
        kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}
        for want in [("Deployment", "strata-operator"), ("Deployment", "strata-translator"),
                     ("Namespace", "strata-system"),
                     ("CustomResourceDefinition", "azureclusters.infrastructure.cluster.x-k8s.io"),
                     ("CustomResourceDefinition", "virtualmachines.azure.strata.dev")]:
            self.assertIn(want, kinds)
        self.assertEqual(len(kinds), len(objs), "no object twice")
        namespaces = set()
        for o in objs:
            md = o["metadata"]
            self.assertEqual(md.get("labels", {}).get("cluster.x-k8s.io/provider"),
                             "infrastructure-strata", f"{o['kind']} {md['name']}")
            if "namespace" in md:
                namespaces.add(md["namespace"])
            if o["kind"] == "CustomResourceDefinition" and \
                    o["spec"]["group"] == "infrastructure.cluster.x-k8s.io":
                served = {v["name"] for v in o["spec"]["versions"] if v["served"]}
                for contract in contracts:
                    label = md["labels"].get(f"cluster.x-k8s.io/{contract}")
                    self.assertIsNotNone(label, f"{md['name']}: no {contract} contract label")
                    self.assertLessEqual(set(label.split("_")), served, md["name"])
        self.assertEqual(namespaces, {"strata-system"}, "one namespace, the one clusterctl targets")

    def test_the_users_choices_are_variables_with_defaults(self):
        text = self.read("infrastructure-components.yaml")
        names = {m.group(1) for m in VARIABLE.finditer(text)}
        self.assertEqual(names, {"STRATA_OPERATOR_IMAGE", "STRATA_TRANSLATOR_IMAGE", "STRATA_NAMESPACE"})
        objs = self.components({"STRATA_OPERATOR_IMAGE": "r.example/op:1",
                                "STRATA_NAMESPACE": "capz-system"})
        images = {c["image"] for o in objs if o["kind"] == "Deployment"
                  for c in o["spec"]["template"]["spec"]["containers"]}
        self.assertEqual(images, {"r.example/op:1", "strata-translator:0.1.0"})
        self.assertEqual({o["metadata"]["namespace"] for o in objs if "namespace" in o["metadata"]},
                         {"capz-system"})
        subjects = {s["namespace"] for o in objs for s in o.get("subjects", []) or []
                    if "namespace" in s}
        self.assertEqual(subjects, {"capz-system"}, "bindings follow the namespace")

    def test_the_default_flavour_renders_to_the_default_sample(self):
        values = {
            "CLUSTER_NAME": "strata-demo", "AZURE_LOCATION": "westeurope",
            "AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
            "KUBERNETES_VERSION": "v1.30.2",
            "AZURE_CONTROL_PLANE_MACHINE_TYPE": "Standard_D2s_v3",
            "AZURE_NODE_MACHINE_TYPE": "Standard_D2s_v3",
            "AZURE_CLIENT_ID_USER_ASSIGNED_IDENTITY": "11111111-1111-1111-1111-111111111111",
            "AZURE_TENANT_ID": "22222222-2222-2222-2222-222222222222",
        }
        rendered = docs(render(self.read("cluster-template.yaml"), values))
        with open(os.path.join(REPO, "samples", "capi", "default-cluster.yaml")) as f:
            sample = docs(f.read())
        self.assertEqual(rendered, sample)
        with self.assertRaises(MissingVariable):
            render(self.read("cluster-template.yaml"),
                   {k: v for k, v in values.items() if k != "AZURE_LOCATION"})

    def test_the_renderer_is_clusterctls(self):
        self.assertEqual(render("${A}-${B:=b}-${C:-c}-${D=d}", {"A": "a", "B": "", "D": ""}), "a-b-c-")
        with self.assertRaises(MissingVariable):
            render("${A}", {})


if __name__ == "__main__":
    unittest.main()
