//! `strata-translator render` as a user runs it: on each samples/capi file it prints exactly the
//! golden CRs; bad input gives one line naming the object and field, and exit code 2.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn render(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata-translator"))
        .arg("render")
        .args(args)
        .current_dir(repo())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn render_prints_the_golden_crs_of_every_sample() {
    let mut n = 0;
    for entry in std::fs::read_dir(repo().join("samples/capi")).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let rel = format!("samples/capi/{stem}.yaml");
        let (code, stdout, stderr) = render(&["-f", &rel], None);
        assert_eq!(code, 0, "{rel}: {stderr}");
        let case = repo().join(format!(
            "translator/tests/golden/sample-{}",
            stem.trim_end_matches("-cluster")
        ));
        let expected = std::fs::read_to_string(case.join("expected.yaml")).unwrap();
        assert_eq!(stdout, expected, "{rel}");
        let notes = std::fs::read_to_string(case.join("notes.txt")).unwrap();
        let printed: String = stderr
            .lines()
            .filter_map(|l| l.strip_prefix("note: "))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(printed, notes, "{rel}");
        n += 1;
    }
    assert!(n >= 4);
}

#[test]
fn several_files_and_stdin_render_together() {
    let machine = std::fs::read_to_string(
        repo().join("translator/tests/golden/control-plane-machine/input.yaml"),
    )
    .unwrap();
    let (code, stdout, stderr) = render(
        &["-f", "samples/capi/default-cluster.yaml", "-f", "-"],
        Some(&machine),
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("name: strata-demo-public-lb"), "{stdout}");
    assert!(stdout.contains("kind: VirtualMachine"), "{stdout}");
}

/// A machine pool whose cluster is not in the input is not rendered, and says so.
#[test]
fn a_machine_pool_without_its_cluster_is_noted_not_rendered() {
    let pool = "apiVersion: cluster.x-k8s.io/v1beta1\nkind: MachinePool\nmetadata: {name: lost-mp-0}\nspec:\n  clusterName: lost\n  template:\n    spec:\n      clusterName: lost\n      bootstrap: {dataSecretName: lost-mp-0}\n      infrastructureRef: {kind: AzureMachinePool, name: lost-mp-0}\n";
    let (code, stdout, stderr) = render(&["-f", "-"], Some(pool));
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.contains("VirtualMachineScaleSet"), "{stdout}");
    assert!(
        stderr.contains(
            "MachinePool default/lost-mp-0: spec.clusterName: no AzureCluster of cluster \"lost\""
        ),
        "{stderr}"
    );
}

#[test]
fn bad_input_is_one_line_naming_object_and_field_with_exit_2() {
    let cases = [
        (
            "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: AzureCluster\nmetadata:\n  name: c1\nspec:\n  location: 'west europe!'\n",
            "AzureCluster default/c1: spec.location:",
        ),
        (
            "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: AzureCluster\nmetadata:\n  name: c1\nspec:\n  networkSpec: {}\n",
            "AzureCluster default/c1: spec: missing field `location`",
        ),
        (
            "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: AzureCluster\nmetadata:\n  name: c1\nspec:\n  location: westeurope\n  networkSpec:\n    subnets:\n    - name: a\n      role: node\n      securityGroup:\n        securityRules:\n        - {name: r1, protocol: Tcp, direction: Inbound, priority: 100}\n        - {name: r2, protocol: Tcp, direction: Inbound, priority: 100}\n",
            "AzureCluster default/c1: spec.networkSpec.subnets[0].securityGroup.securityRules[1].priority:",
        ),
        ("kind: [\n", "-: document 1"),
    ];
    for (input, expected) in cases {
        let (code, stdout, stderr) = render(&["-f", "-"], Some(input));
        assert_eq!(code, 2, "{input}: {stderr}");
        assert!(stdout.is_empty());
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!("error: {expected}")),
            "{stderr}"
        );
    }
}

#[test]
fn unreadable_file_exits_1() {
    let (code, _, stderr) = render(&["-f", "does/not/exist.yaml"], None);
    assert_eq!(code, 1);
    assert!(stderr.contains("does/not/exist.yaml"), "{stderr}");
}
