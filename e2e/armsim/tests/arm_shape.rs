//! The emulator's bodies and status codes held against ARM's REST specification (extracts under
//! tests/data/, with their source paths and commits): server-filled defaults, read-only
//! properties, documented status codes, allocation and back-references, and the GET→PUT round
//! trip a drift detector relies on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, HashSet};
use std::net::Ipv4Addr;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// The private DNS kinds' API version (their own REST specification, `privatedns`).
const PRIVATE_DNS: &str = "api-version=2024-06-01";

/// The swagger extracts: `paths` (success codes per kind and verb), `roots` (kind → definition)
/// and `definitions`.
fn extracts() -> Vec<Value> {
    [
        include_str!("data/network-2024-03-01.json"),
        include_str!("data/compute-2024-07-01.json"),
        include_str!("data/resources-2021-04-01.json"),
        include_str!("data/privatedns-2024-06-01.json"),
    ]
    .iter()
    .map(|text| serde_json::from_str(text).unwrap())
    .collect()
}

/// The extract that describes `kind`.
fn extract_for(kind: &str) -> Value {
    extracts()
        .into_iter()
        .find(|e| e["roots"].get(kind).is_some())
        .unwrap_or_else(|| panic!("no swagger extract for {kind}"))
}

/// Read-only properties ARM sets only in some situations (`Definition.property`), so their
/// absence from a freshly created resource is right. Every other read-only property of the
/// extracts must be present.
const SOMETIMES: &[&str] = &[
    // Back-references: present once something refers to the resource or part.
    "SubnetPropertiesFormat.ipConfigurations",
    "SubnetPropertiesFormat.privateEndpoints",
    "SubnetPropertiesFormat.ipConfigurationProfiles",
    "SubnetPropertiesFormat.resourceNavigationLinks",
    "SubnetPropertiesFormat.serviceAssociationLinks",
    "SubnetPropertiesFormat.purpose",
    "NetworkSecurityGroupPropertiesFormat.networkInterfaces",
    "NetworkSecurityGroupPropertiesFormat.subnets",
    "RouteTablePropertiesFormat.subnets",
    "NatGatewayPropertiesFormat.subnets",
    "PublicIPAddressPropertiesFormat.ipConfiguration",
    "FrontendIPConfigurationPropertiesFormat.inboundNatRules",
    "FrontendIPConfigurationPropertiesFormat.inboundNatPools",
    "FrontendIPConfigurationPropertiesFormat.outboundRules",
    "FrontendIPConfigurationPropertiesFormat.loadBalancingRules",
    "BackendAddressPoolPropertiesFormat.backendIPConfigurations",
    "BackendAddressPoolPropertiesFormat.loadBalancingRules",
    "BackendAddressPoolPropertiesFormat.outboundRule",
    "BackendAddressPoolPropertiesFormat.outboundRules",
    "BackendAddressPoolPropertiesFormat.inboundNatRules",
    "ProbePropertiesFormat.loadBalancingRules",
    "InboundNatRulePropertiesFormat.backendIPConfiguration",
    "NetworkInterfacePropertiesFormat.virtualMachine",
    // Present only when the VNets use encryption.
    "VirtualNetworkPeeringPropertiesFormat.remoteVirtualNetworkEncryption",
    // Features the emulator does not offer (flow logs, private endpoints, DSCP, BareMetal).
    "VirtualNetworkPropertiesFormat.flowLogs",
    "NetworkSecurityGroupPropertiesFormat.flowLogs",
    "NetworkInterfacePropertiesFormat.privateEndpoint",
    "NetworkInterfacePropertiesFormat.dscpConfiguration",
    "NetworkInterfaceIPConfigurationPropertiesFormat.privateLinkConnectionProperties",
    // Only while a VM holds the NIC (checked by `nic_gets_mac_and_primary_once_a_vm_holds_it`).
    "NetworkInterfacePropertiesFormat.macAddress",
    "NetworkInterfacePropertiesFormat.primary",
    // Only with `internalDnsNameLabel`.
    "NetworkInterfaceDnsSettings.internalFqdn",
    // Only with `$expand=instanceView`, extensions, a scale set or an instance view.
    "VirtualMachineProperties.instanceView",
    "VirtualMachine.resources",
    "VirtualMachine.managedBy",
    "AvailabilitySetProperties.statuses",
    // Only while a VM holds the disk (or several, for shared disks).
    "Disk.managedBy",
    "Disk.managedByExtended",
];

/// The properties of a definition, its `allOf` parents' included.
fn properties(ext: &Value, def: &str) -> Vec<(String, Value)> {
    let d = &ext["definitions"][def];
    assert!(d.is_object(), "definition {def} missing from the extract");
    let mut out: Vec<(String, Value)> = d["properties"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    for parent in d["allOf"].as_array().into_iter().flatten() {
        out.extend(properties(ext, ref_name(parent).unwrap()));
    }
    out
}

fn ref_name(schema: &Value) -> Option<&str> {
    schema["$ref"]
        .as_str()
        .map(|r| r.trim_start_matches("#/definitions/"))
}

/// What the spec says about `body` (an instance of `def`): defaults present with their value,
/// read-only properties present unless listed in [`SOMETIMES`]; owned parts (non-read-only
/// objects and arrays of objects) checked in turn.
fn check(ext: &Value, def: &str, body: &Value, at: &str, failures: &mut Vec<String>) {
    for (name, schema) in properties(ext, def) {
        let value = body.get(&name).filter(|v| !v.is_null());
        let here = format!("{at}.{name}");
        if let Some(default) = schema.get("default").filter(|d| !d.is_null())
            && value != Some(default)
        {
            failures.push(format!("{here}: spec default {default}, got {value:?}"));
        }
        let read_only = schema["readOnly"] == true;
        if read_only && value.is_none() && !SOMETIMES.contains(&format!("{def}.{name}").as_str()) {
            failures.push(format!("{here}: read-only property missing"));
        }
        if read_only {
            continue;
        }
        let Some(value) = value else { continue };
        if let Some(child) = ref_name(&schema).filter(|c| *c != "SubResource")
            && ext["definitions"][child]["properties"].is_object()
            && value.is_object()
        {
            check(ext, child, value, &here, failures);
        }
        if let (Some(child), Some(items)) = (ref_name(&schema["items"]), value.as_array())
            && child != "SubResource"
        {
            for (i, item) in items.iter().enumerate() {
                check(ext, child, item, &format!("{here}[{i}]"), failures);
            }
        }
    }
}

/// Drops what the spec marks read-only, as SDKs do before sending a model back.
fn strip_read_only(ext: &Value, def: &str, body: &mut Value) {
    for (name, schema) in properties(ext, def) {
        let Some(obj) = body.as_object_mut() else {
            return;
        };
        if schema["readOnly"] == true {
            obj.remove(&name);
            continue;
        }
        let Some(value) = obj.get_mut(&name) else {
            continue;
        };
        if let Some(child) = ref_name(&schema)
            && ext["definitions"][child]["properties"].is_object()
        {
            strip_read_only(ext, child, value);
        }
        if let (Some(child), Some(items)) = (
            ref_name(&schema["items"]).map(str::to_string),
            value.as_array_mut(),
        ) {
            for item in items {
                strip_read_only(ext, &child, item);
            }
        }
    }
}

/// Removes every `etag` (the resource's and its parts'), the one thing a no-op PUT changes.
fn without_etags(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "etag")
                .map(|(k, v)| (k.clone(), without_etags(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_etags).collect()),
        other => other.clone(),
    }
}

fn codes(ext: &Value, kind: &str, verb: &str) -> Vec<u16> {
    ext["paths"][kind][verb]
        .as_array()
        .unwrap_or_else(|| panic!("no {verb} codes for {kind}"))
        .iter()
        .map(|c| c.as_str().unwrap().parse().unwrap())
        .collect()
}

/// One resource of each emulated kind: `(kind, path, api-version, create body)`, in creation
/// order. Parts (subnets, rules, LB parts, routes, IP configurations) are included so their
/// definitions are checked too.
fn fleet(g: &str) -> Vec<(&'static str, String, &'static str, Value)> {
    let subnet = net(g, "virtualNetworks/vnet/subnets/default");
    let lb = net(g, "loadBalancers/lb");
    vec![
        (
            "Microsoft.Resources/resourceGroups",
            rg(g),
            RES,
            json!({ "location": "westeurope" }),
        ),
        (
            "Microsoft.Network/virtualNetworks",
            net(g, "virtualNetworks/vnet"),
            NET,
            json!({ "location": "westeurope", "properties": { "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] } } }),
        ),
        (
            "Microsoft.Network/virtualNetworks/subnets",
            subnet.clone(),
            NET,
            json!({ "properties": { "addressPrefix": "10.0.1.0/24" } }),
        ),
        (
            "Microsoft.Network/networkSecurityGroups",
            net(g, "networkSecurityGroups/nsg"),
            NET,
            json!({ "location": "westeurope" }),
        ),
        (
            "Microsoft.Network/networkSecurityGroups/securityRules",
            net(g, "networkSecurityGroups/nsg/securityRules/ssh"),
            NET,
            json!({ "properties": { "priority": 100, "direction": "Inbound", "access": "Allow", "protocol": "Tcp",
                "sourcePortRange": "*", "destinationPortRange": "22", "sourceAddressPrefix": "*", "destinationAddressPrefix": "*" } }),
        ),
        (
            "Microsoft.Network/routeTables",
            net(g, "routeTables/rt"),
            NET,
            json!({ "location": "westeurope", "properties": { "routes": [
                { "name": "default", "properties": { "addressPrefix": "0.0.0.0/0", "nextHopType": "Internet" } }
            ] } }),
        ),
        (
            "Microsoft.Network/routeTables/routes",
            net(g, "routeTables/rt/routes/peers"),
            NET,
            json!({ "properties": { "addressPrefix": "10.1.0.0/16", "nextHopType": "VnetLocal" } }),
        ),
        (
            "Microsoft.Network/natGateways",
            net(g, "natGateways/nat"),
            NET,
            json!({ "location": "westeurope" }),
        ),
        (
            "Microsoft.Network/publicIPAddresses",
            net(g, "publicIPAddresses/pip"),
            NET,
            json!({ "location": "westeurope", "sku": { "name": "Standard" } }),
        ),
        (
            "Microsoft.Network/loadBalancers",
            lb.clone(),
            NET,
            json!({ "location": "westeurope", "sku": { "name": "Standard" }, "properties": {
                "frontendIPConfigurations": [
                    { "name": "internal", "properties": { "subnet": { "id": subnet } } },
                    { "name": "public", "properties": { "publicIPAddress": { "id": net(g, "publicIPAddresses/pip") } } }
                ],
                "backendAddressPools": [ { "name": "pool" } ],
                "probes": [ { "name": "probe", "properties": { "protocol": "Tcp", "port": 6443 } } ],
                "loadBalancingRules": [ { "name": "api", "properties": {
                    "frontendIPConfiguration": { "id": format!("{lb}/frontendIPConfigurations/internal") },
                    "backendAddressPool": { "id": format!("{lb}/backendAddressPools/pool") },
                    "probe": { "id": format!("{lb}/probes/probe") },
                    "protocol": "Tcp", "frontendPort": 6443, "backendPort": 6443 } } ],
                "inboundNatRules": [ { "name": "ssh", "properties": {
                    "frontendIPConfiguration": { "id": format!("{lb}/frontendIPConfigurations/public") },
                    "protocol": "Tcp", "frontendPort": 2222, "backendPort": 22 } } ],
                "outboundRules": [ { "name": "out", "properties": {
                    "frontendIPConfigurations": [ { "id": format!("{lb}/frontendIPConfigurations/public") } ],
                    "backendAddressPool": { "id": format!("{lb}/backendAddressPools/pool") },
                    "protocol": "All" } } ]
            } }),
        ),
        (
            "Microsoft.Network/networkInterfaces",
            net(g, "networkInterfaces/nic"),
            NET,
            json!({ "location": "westeurope", "properties": { "ipConfigurations": [
                { "name": "ipconfig1", "properties": {
                    "subnet": { "id": subnet },
                    "loadBalancerBackendAddressPools": [ { "id": format!("{lb}/backendAddressPools/pool") } ],
                    "loadBalancerInboundNatRules": [ { "id": format!("{lb}/inboundNatRules/ssh") } ] } }
            ] } }),
        ),
        (
            "Microsoft.Compute/availabilitySets",
            compute(g, "availabilitySets/set"),
            COMPUTE,
            json!({ "location": "westeurope" }),
        ),
        (
            "Microsoft.Compute/disks",
            compute(g, "disks/data"),
            "api-version=2024-03-02",
            json!({ "location": "westeurope", "properties": { "creationData": { "createOption": "Empty" }, "diskSizeGB": 8 } }),
        ),
        (
            "Microsoft.Compute/virtualMachines",
            compute(g, "virtualMachines/vm"),
            COMPUTE,
            json!({
                "location": "westeurope",
                "properties": {
                    "hardwareProfile": { "vmSize": "Standard_D2s_v3" },
                    "osProfile": { "computerName": "vm", "adminUsername": "capi", "adminPassword": "s3cret!" },
                    "storageProfile": {
                        "imageReference": { "publisher": "Canonical", "offer": "ubuntu", "sku": "22_04", "version": "latest" },
                        "dataDisks": [ { "lun": 0, "createOption": "Empty", "diskSizeGB": 16 } ]
                    },
                    "availabilitySet": { "id": compute(g, "availabilitySets/set") },
                    "networkProfile": { "networkInterfaces": [ { "id": net(g, "networkInterfaces/nic") } ] }
                }
            }),
        ),
        (
            "Microsoft.Compute/virtualMachineScaleSets",
            compute(g, "virtualMachineScaleSets/pool"),
            COMPUTE,
            json!({
                "location": "westeurope",
                "sku": { "name": "Standard_D2s_v3", "capacity": 1 },
                "properties": {
                    "virtualMachineProfile": {
                        "osProfile": { "computerNamePrefix": "pool", "adminUsername": "capi", "customData": "c2VjcmV0" },
                        "storageProfile": { "imageReference": { "publisher": "Canonical", "offer": "ubuntu", "sku": "22_04", "version": "latest" } },
                        "networkProfile": { "networkInterfaceConfigurations": [ { "name": "pool-nic-0", "properties": {
                            "primary": true, "ipConfigurations": [ { "name": "ipConfig0", "properties": { "subnet": { "id": subnet } } } ] } } ] }
                    }
                }
            }),
        ),
        (
            "Microsoft.Network/virtualNetworks",
            net(g, "virtualNetworks/hub"),
            NET,
            json!({ "location": "westeurope", "properties": { "addressSpace": { "addressPrefixes": ["10.100.0.0/16"] } } }),
        ),
        (
            "Microsoft.Network/virtualNetworks/virtualNetworkPeerings",
            net(g, "virtualNetworks/vnet/virtualNetworkPeerings/to-hub"),
            NET,
            json!({ "properties": { "remoteVirtualNetwork": { "id": net(g, "virtualNetworks/hub") } } }),
        ),
        (
            "Microsoft.Network/virtualNetworks/subnets",
            net(g, "virtualNetworks/vnet/subnets/AzureBastionSubnet"),
            NET,
            json!({ "properties": { "addressPrefix": "10.0.255.0/26" } }),
        ),
        (
            "Microsoft.Network/publicIPAddresses",
            net(g, "publicIPAddresses/bastion-pip"),
            NET,
            json!({ "location": "westeurope", "sku": { "name": "Standard" }, "properties": { "publicIPAllocationMethod": "Static" } }),
        ),
        (
            "Microsoft.Network/bastionHosts",
            net(g, "bastionHosts/bastion"),
            NET,
            json!({ "location": "westeurope", "properties": { "ipConfigurations": [
                { "name": "bastionIP", "properties": {
                    "subnet": { "id": net(g, "virtualNetworks/vnet/subnets/AzureBastionSubnet") },
                    "publicIPAddress": { "id": net(g, "publicIPAddresses/bastion-pip") } } }
            ] } }),
        ),
        (
            "Microsoft.Network/privateDnsZones",
            net(g, "privateDnsZones/shape.capz.io"),
            PRIVATE_DNS,
            json!({ "location": "global" }),
        ),
        (
            "Microsoft.Network/privateDnsZones/virtualNetworkLinks",
            net(
                g,
                "privateDnsZones/shape.capz.io/virtualNetworkLinks/vnet-link",
            ),
            PRIVATE_DNS,
            json!({ "location": "global", "properties": { "virtualNetwork": { "id": net(g, "virtualNetworks/vnet") } } }),
        ),
        (
            "Microsoft.Network/privateDnsZones/A",
            net(g, "privateDnsZones/shape.capz.io/A/apiserver"),
            PRIVATE_DNS,
            json!({ "properties": { "ttl": 300, "aRecords": [ { "ipv4Address": "10.0.0.100" } ] } }),
        ),
    ]
}

#[tokio::test]
async fn every_kind_has_its_spec_defaults_read_only_fields_and_status_codes() {
    let sim = Sim::start().await;
    let g = "shape";
    let mut failures = Vec::new();
    let fleet = fleet(g);
    for (kind, path, version, body) in &fleet {
        let ext = extract_for(kind);
        let root = ext["roots"][kind].as_str().unwrap();
        let put_codes = codes(&ext, kind, "put");
        let created = sim.put(path, version, body.clone()).await;
        assert!(
            put_codes.contains(&created.status.as_u16()),
            "create {kind}: {} not in {put_codes:?}: {}",
            created.status,
            created.body
        );
        check(
            &ext,
            root,
            &created.body,
            &format!("{kind} create response"),
            &mut failures,
        );
        assert_eq!(sim.wait(&created).await, "Succeeded", "{kind}");
        let got = sim.get(path, version).await;
        assert!(codes(&ext, kind, "get").contains(&got.status.as_u16()));
        check(
            &ext,
            root,
            &got.body,
            &format!("{kind} after create"),
            &mut failures,
        );

        // An update (new tags) keeps every default and read-only field.
        let mut update = body.clone();
        update["tags"] = json!({ "pass": "2" });
        let updated = sim.put(path, version, update).await;
        assert!(
            put_codes.contains(&updated.status.as_u16()),
            "update {kind}: {} not in {put_codes:?}: {}",
            updated.status,
            updated.body
        );
        assert_eq!(updated.status, StatusCode::OK, "update {kind}");
        check(
            &ext,
            root,
            &updated.body,
            &format!("{kind} update response"),
            &mut failures,
        );
        assert_eq!(sim.wait(&updated).await, "Succeeded", "{kind}");
        let got = sim.get(path, version).await;
        check(
            &ext,
            root,
            &got.body,
            &format!("{kind} after update"),
            &mut failures,
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // Deletes in reverse order: documented codes, and again once gone.
    for (kind, path, version, _) in fleet.iter().rev() {
        let ext = extract_for(kind);
        let delete_codes = codes(&ext, kind, "delete");
        let r = sim.delete(path, version).await;
        assert!(
            delete_codes.contains(&r.status.as_u16()),
            "delete {kind}: {} not in {delete_codes:?}: {}",
            r.status,
            r.body
        );
        assert_eq!(sim.wait(&r).await, "Succeeded", "{kind}");
        if *kind == "Microsoft.Resources/resourceGroups" {
            let head = sim
                .call(Method::HEAD, &format!("{path}?{version}"), None)
                .await;
            assert!(codes(&ext, kind, "head").contains(&head.status.as_u16()));
            assert_eq!(head.status, StatusCode::NOT_FOUND);
        } else {
            let again = sim.delete(path, version).await;
            assert!(
                delete_codes.contains(&again.status.as_u16()),
                "second delete {kind}: {}",
                again.status
            );
        }
    }
}

#[tokio::test]
async fn availability_set_create_answers_200() {
    let sim = Sim::start().await;
    sim.group("g").await;
    let r = sim
        .put(
            &compute("g", "availabilitySets/set"),
            COMPUTE,
            json!({ "location": "westeurope" }),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["sku"]["name"], "Classic");
    assert_eq!(r.body["properties"]["virtualMachines"], json!([]));
}

/// The values the issue found missing, as ARM returns them, and the collections ARM always lists.
#[tokio::test]
async fn arm_fills_defaults_and_empty_collections() {
    let sim = Sim::start().await;
    let g = "fill";
    let mut bodies = BTreeMap::new();
    for (kind, path, version, body) in fleet(g) {
        bodies.insert(kind, sim.create(&path, version, body).await);
    }
    let expect = [
        (
            "Microsoft.Network/networkInterfaces",
            "/properties/enableIPForwarding",
            json!(false),
        ),
        (
            "Microsoft.Network/networkInterfaces",
            "/properties/vnetEncryptionSupported",
            json!(false),
        ),
        (
            "Microsoft.Network/networkInterfaces",
            "/properties/dnsSettings/dnsServers",
            json!([]),
        ),
        (
            "Microsoft.Network/networkInterfaces",
            "/properties/dnsSettings/appliedDnsServers",
            json!([]),
        ),
        (
            "Microsoft.Network/networkInterfaces",
            "/properties/ipConfigurations/0/properties/privateIPAddressVersion",
            json!("IPv4"),
        ),
        (
            "Microsoft.Network/networkInterfaces",
            "/properties/ipConfigurations/0/type",
            json!("Microsoft.Network/networkInterfaces/ipConfigurations"),
        ),
        (
            "Microsoft.Network/routeTables",
            "/properties/disableBgpRoutePropagation",
            json!(false),
        ),
        (
            "Microsoft.Network/routeTables",
            "/properties/routes/0/type",
            json!("Microsoft.Network/routeTables/routes"),
        ),
        (
            "Microsoft.Network/routeTables",
            "/properties/routes/0/properties/provisioningState",
            json!("Succeeded"),
        ),
        (
            "Microsoft.Network/loadBalancers",
            "/properties/loadBalancingRules/0/properties/enableTcpReset",
            json!(false),
        ),
        (
            "Microsoft.Network/loadBalancers",
            "/properties/loadBalancingRules/0/properties/disableOutboundSnat",
            json!(false),
        ),
        (
            "Microsoft.Network/loadBalancers",
            "/properties/inboundNatRules/0/properties/enableTcpReset",
            json!(false),
        ),
        (
            "Microsoft.Network/loadBalancers",
            "/properties/outboundRules/0/properties/allocatedOutboundPorts",
            json!(0),
        ),
        (
            "Microsoft.Network/loadBalancers",
            "/properties/outboundRules/0/properties/idleTimeoutInMinutes",
            json!(4),
        ),
        (
            "Microsoft.Network/loadBalancers",
            "/properties/outboundRules/0/properties/enableTcpReset",
            json!(false),
        ),
        (
            "Microsoft.Network/loadBalancers",
            "/properties/frontendIPConfigurations/0/properties/privateIPAllocationMethod",
            json!("Dynamic"),
        ),
        (
            "Microsoft.Network/loadBalancers",
            "/properties/frontendIPConfigurations/0/properties/privateIPAddressVersion",
            json!("IPv4"),
        ),
        (
            "Microsoft.Network/loadBalancers",
            "/properties/frontendIPConfigurations/0/type",
            json!("Microsoft.Network/loadBalancers/frontendIPConfigurations"),
        ),
        (
            "Microsoft.Network/loadBalancers",
            "/properties/probes/0/properties/provisioningState",
            json!("Succeeded"),
        ),
        (
            "Microsoft.Network/loadBalancers",
            "/properties/inboundNatPools",
            json!([]),
        ),
        (
            "Microsoft.Network/publicIPAddresses",
            "/properties/ddosSettings/protectionMode",
            json!("VirtualNetworkInherited"),
        ),
        (
            "Microsoft.Network/publicIPAddresses",
            "/properties/publicIPAllocationMethod",
            json!("Static"),
        ),
        (
            "Microsoft.Network/publicIPAddresses",
            "/properties/ipTags",
            json!([]),
        ),
        (
            "Microsoft.Network/virtualNetworks",
            "/properties/virtualNetworkPeerings",
            json!([]),
        ),
        (
            "Microsoft.Network/virtualNetworks/subnets",
            "/properties/delegations",
            json!([]),
        ),
        (
            "Microsoft.Network/networkSecurityGroups/securityRules",
            "/properties/sourcePortRanges",
            json!([]),
        ),
        (
            "Microsoft.Compute/virtualMachines",
            "/properties/osProfile/secrets",
            json!([]),
        ),
        (
            "Microsoft.Compute/virtualMachines",
            "/properties/osProfile/linuxConfiguration/provisionVMAgent",
            json!(true),
        ),
        (
            "Microsoft.Compute/virtualMachines",
            "/properties/storageProfile/osDisk/caching",
            json!("ReadWrite"),
        ),
        (
            "Microsoft.Compute/virtualMachines",
            "/properties/storageProfile/dataDisks/0/caching",
            json!("None"),
        ),
        (
            "Microsoft.Compute/virtualMachines",
            "/properties/storageProfile/dataDisks/0/deleteOption",
            json!("Detach"),
        ),
        (
            "Microsoft.Compute/disks",
            "/sku/name",
            json!("Standard_LRS"),
        ),
        (
            "Microsoft.Compute/disks",
            "/properties/diskSizeBytes",
            json!(8u64 << 30),
        ),
    ];
    for (kind, pointer, value) in expect {
        assert_eq!(
            bodies[kind].pointer(pointer),
            Some(&value),
            "{kind} {pointer}: {}",
            bodies[kind]
        );
    }
    // A VM without data disks still lists them.
    let nic = net(g, "networkInterfaces/nic2");
    sim.create(&nic, NET, json!({ "location": "westeurope", "properties": { "ipConfigurations": [
        { "name": "ip", "properties": { "subnet": { "id": net(g, "virtualNetworks/vnet/subnets/default") } } } ] } })).await;
    let vm = sim
        .create(
            &compute(g, "virtualMachines/bare"),
            COMPUTE,
            sim.vm_body(g, "nic2"),
        )
        .await;
    assert_eq!(vm["properties"]["storageProfile"]["dataDisks"], json!([]));
    // A Basic public IP is dynamic and gets no DDoS settings.
    let basic = sim
        .create(
            &net(g, "publicIPAddresses/basic"),
            NET,
            json!({ "location": "westeurope" }),
        )
        .await;
    assert_eq!(basic["properties"]["publicIPAllocationMethod"], "Dynamic");
    assert!(basic["properties"].get("ddosSettings").is_none());
    // What the client sets is kept.
    let rt = sim
        .create(
            &net(g, "routeTables/rt2"),
            NET,
            json!({ "location": "westeurope",
        "properties": { "disableBgpRoutePropagation": true } }),
        )
        .await;
    assert_eq!(rt["properties"]["disableBgpRoutePropagation"], true);
    assert_eq!(rt["properties"]["routes"], json!([]));
}

#[tokio::test]
async fn every_nsg_has_arms_six_default_rules_read_only() {
    let sim = Sim::start().await;
    sim.group("g").await;
    let path = net("g", "networkSecurityGroups/nsg");
    let nsg = sim
        .create(&path, NET, json!({ "location": "westeurope" }))
        .await;
    let rules = nsg["properties"]["defaultSecurityRules"]
        .as_array()
        .unwrap();
    let seen: Vec<(String, i64, String, String, String, String)> = rules
        .iter()
        .map(|r| {
            let p = &r["properties"];
            (
                r["name"].as_str().unwrap().to_string(),
                p["priority"].as_i64().unwrap(),
                p["direction"].as_str().unwrap().to_string(),
                p["access"].as_str().unwrap().to_string(),
                p["sourceAddressPrefix"].as_str().unwrap().to_string(),
                p["destinationAddressPrefix"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = [
        (
            "AllowVnetInBound",
            65000,
            "Inbound",
            "Allow",
            "VirtualNetwork",
            "VirtualNetwork",
        ),
        (
            "AllowAzureLoadBalancerInBound",
            65001,
            "Inbound",
            "Allow",
            "AzureLoadBalancer",
            "*",
        ),
        ("DenyAllInBound", 65500, "Inbound", "Deny", "*", "*"),
        (
            "AllowVnetOutBound",
            65000,
            "Outbound",
            "Allow",
            "VirtualNetwork",
            "VirtualNetwork",
        ),
        (
            "AllowInternetOutBound",
            65001,
            "Outbound",
            "Allow",
            "*",
            "Internet",
        ),
        ("DenyAllOutBound", 65500, "Outbound", "Deny", "*", "*"),
    ];
    assert_eq!(seen.len(), 6);
    for (w, s) in want.iter().zip(&seen) {
        assert_eq!(
            (w.0, w.1, w.2, w.3, w.4, w.5),
            (
                s.0.as_str(),
                s.1,
                s.2.as_str(),
                s.3.as_str(),
                s.4.as_str(),
                s.5.as_str()
            )
        );
    }
    for r in rules {
        assert_eq!(
            r["type"],
            "Microsoft.Network/networkSecurityGroups/defaultSecurityRules"
        );
        assert_eq!(
            r["id"],
            format!(
                "{path}/defaultSecurityRules/{}",
                r["name"].as_str().unwrap()
            )
        );
        assert_eq!(r["properties"]["protocol"], "*");
        assert_eq!(r["properties"]["destinationPortRange"], "*");
        assert_eq!(r["properties"]["provisioningState"], "Succeeded");
    }
    // A PUT cannot replace them.
    let mut body = nsg.clone();
    body["properties"]["defaultSecurityRules"] =
        json!([{ "name": "Mine", "properties": { "priority": 65000 } }]);
    let after = sim.create(&path, NET, body).await;
    assert_eq!(
        after["properties"]["defaultSecurityRules"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    assert_eq!(
        after["properties"]["defaultSecurityRules"][0]["name"],
        "AllowVnetInBound"
    );
}

fn address(body: &Value, pointer: &str) -> Ipv4Addr {
    body.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no address at {pointer}: {body}"))
        .parse()
        .unwrap()
}

fn internal_lb(g: &str, frontends: &[(&str, Option<&str>)]) -> Value {
    let fes: Vec<Value> = frontends
        .iter()
        .map(|(name, ip)| {
            let mut props =
                json!({ "subnet": { "id": net(g, "virtualNetworks/vnet/subnets/default") } });
            if let Some(ip) = ip {
                props["privateIPAllocationMethod"] = json!("Static");
                props["privateIPAddress"] = json!(ip);
            }
            json!({ "name": name, "properties": props })
        })
        .collect();
    json!({ "location": "westeurope", "sku": { "name": "Standard" }, "properties": { "frontendIPConfigurations": fes } })
}

#[tokio::test]
async fn internal_frontends_and_nics_share_a_subnet_without_collisions() {
    let sim = Sim::start().await;
    let g = "ipam";
    sim.network(g).await;
    let lb = net(g, "loadBalancers/ilb");
    let created = sim
        .create(&lb, NET, internal_lb(g, &[("a", None), ("b", None)]))
        .await;
    let mut all = vec![
        address(
            &created,
            "/properties/frontendIPConfigurations/0/properties/privateIPAddress",
        ),
        address(
            &created,
            "/properties/frontendIPConfigurations/1/properties/privateIPAddress",
        ),
    ];
    for i in 0..3 {
        let nic = sim.nic(g, &format!("nic{i}")).await;
        all.push(address(
            &nic,
            "/properties/ipConfigurations/0/properties/privateIPAddress",
        ));
    }
    let distinct: HashSet<_> = all.iter().collect();
    assert_eq!(distinct.len(), 5, "{all:?}");
    let subnet: ipnet::Ipv4Net = "10.0.1.0/24".parse().unwrap();
    for a in &all {
        assert!(
            subnet.contains(a) && a.octets()[3] >= 4 && a.octets()[3] < 255,
            "{a}"
        );
    }
    assert_eq!(
        created["properties"]["frontendIPConfigurations"][0]["properties"]["privateIPAllocationMethod"],
        "Dynamic"
    );

    // The address is kept on update; a static address taken by a NIC is refused.
    let again = sim
        .create(&lb, NET, internal_lb(g, &[("a", None), ("b", None)]))
        .await;
    assert_eq!(
        address(
            &again,
            "/properties/frontendIPConfigurations/0/properties/privateIPAddress"
        ),
        all[0]
    );
    let taken = all[2].to_string();
    let r = sim
        .put(
            &net(g, "loadBalancers/other"),
            NET,
            internal_lb(g, &[("s", Some(&taken))]),
        )
        .await;
    assert_eq!(r.code(), "PrivateIPAddressInUse", "{}", r.body);
    let r = sim
        .put(
            &net(g, "loadBalancers/other"),
            NET,
            internal_lb(g, &[("s", Some("10.0.2.9"))]),
        )
        .await;
    assert_eq!(r.code(), "PrivateIPAddressNotInSubnet", "{}", r.body);
    let fixed = sim
        .create(
            &net(g, "loadBalancers/other"),
            NET,
            internal_lb(g, &[("s", Some("10.0.1.200"))]),
        )
        .await;
    assert_eq!(
        fixed["properties"]["frontendIPConfigurations"][0]["properties"]["privateIPAllocationMethod"],
        "Static"
    );
    let r = sim
        .put(
            &net(g, "networkInterfaces/late"),
            NET,
            json!({ "location": "westeurope", "properties": {
        "ipConfigurations": [ { "name": "ip", "properties": { "privateIPAllocationMethod": "Static",
            "privateIPAddress": "10.0.1.200", "subnet": { "id": sim.subnet_id(g) } } } ] } }),
        )
        .await;
    assert_eq!(r.code(), "PrivateIPAddressInUse", "{}", r.body);
}

#[tokio::test]
async fn a_subnet_lists_and_is_held_by_load_balancer_frontends() {
    let sim = Sim::start().await;
    let g = "held";
    sim.network(g).await;
    let lb = net(g, "loadBalancers/ilb");
    let created = sim.create(&lb, NET, internal_lb(g, &[("fe", None)])).await;
    let fe_address = address(
        &created,
        "/properties/frontendIPConfigurations/0/properties/privateIPAddress",
    );
    let nic = sim.nic(g, "nic").await;

    let subnet = sim.get(&sim.subnet_id(g), NET).await.body;
    let ids: Vec<&str> = subnet["properties"]["ipConfigurations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&format!("{lb}/frontendIPConfigurations/fe").as_str()),
        "{ids:?}"
    );
    assert!(
        ids.contains(
            &nic["properties"]["ipConfigurations"][0]["id"]
                .as_str()
                .unwrap()
        ),
        "{ids:?}"
    );
    // The VNet shows the same inline.
    let vnet = sim.get(&net(g, "virtualNetworks/vnet"), NET).await.body;
    assert_eq!(
        vnet["properties"]["subnets"][0]["properties"]["ipConfigurations"],
        subnet["properties"]["ipConfigurations"]
    );

    // The NIC goes; the frontend still holds the subnet.
    let r = sim.delete(&net(g, "networkInterfaces/nic"), NET).await;
    assert_eq!(sim.wait(&r).await, "Succeeded");
    let r = sim.delete(&sim.subnet_id(g), NET).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "InUseSubnetCannotBeDeleted"),
        "{}",
        r.body
    );
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("loadBalancers/ilb")
    );

    // Once the load balancer is gone the address is free again and the subnet can go.
    let r = sim.delete(&lb, NET).await;
    assert_eq!(sim.wait(&r).await, "Succeeded");
    let reused = sim.nic(g, "again").await;
    assert_eq!(
        address(
            &reused,
            "/properties/ipConfigurations/0/properties/privateIPAddress"
        ),
        fe_address
    );
    let r = sim.delete(&net(g, "networkInterfaces/again"), NET).await;
    assert_eq!(sim.wait(&r).await, "Succeeded");
    let r = sim.delete(&sim.subnet_id(g), NET).await;
    assert!(r.status.is_success(), "{} {}", r.status, r.body);
}

#[tokio::test]
async fn load_balancer_parts_list_the_rules_and_nics_that_use_them() {
    let sim = Sim::start().await;
    let g = "parts";
    for (kind, path, version, body) in fleet(g).into_iter().take(11) {
        let _ = kind;
        sim.create(&path, version, body).await;
    }
    let lb = net(g, "loadBalancers/lb");
    let body = sim.get(&lb, NET).await.body;
    let p = &body["properties"];
    let ids = |v: &Value| -> Vec<String> {
        v.as_array().map_or(Vec::new(), |a| {
            a.iter()
                .map(|x| x["id"].as_str().unwrap().to_string())
                .collect()
        })
    };
    let rule = format!("{lb}/loadBalancingRules/api");
    let nat = format!("{lb}/inboundNatRules/ssh");
    let out = format!("{lb}/outboundRules/out");
    let nic_ip = format!(
        "{}/ipConfigurations/ipconfig1",
        net(g, "networkInterfaces/nic")
    );
    assert_eq!(
        ids(&p["frontendIPConfigurations"][0]["properties"]["loadBalancingRules"]),
        [rule.as_str()]
    );
    assert_eq!(
        ids(&p["frontendIPConfigurations"][1]["properties"]["inboundNatRules"]),
        [nat.as_str()]
    );
    assert_eq!(
        ids(&p["frontendIPConfigurations"][1]["properties"]["outboundRules"]),
        [out.as_str()]
    );
    assert!(
        p["frontendIPConfigurations"][1]["properties"]
            .get("loadBalancingRules")
            .is_none()
    );
    assert_eq!(
        ids(&p["backendAddressPools"][0]["properties"]["loadBalancingRules"]),
        [rule.as_str()]
    );
    assert_eq!(
        ids(&p["backendAddressPools"][0]["properties"]["outboundRules"]),
        [out.as_str()]
    );
    assert_eq!(
        ids(&p["backendAddressPools"][0]["properties"]["backendIPConfigurations"]),
        [nic_ip.as_str()]
    );
    assert_eq!(
        ids(&p["probes"][0]["properties"]["loadBalancingRules"]),
        [rule.as_str()]
    );
    assert_eq!(
        p["inboundNatRules"][0]["properties"]["backendIPConfiguration"]["id"],
        nic_ip.as_str()
    );
    // The public IP names the frontend that uses it.
    let pip = sim.get(&net(g, "publicIPAddresses/pip"), NET).await.body;
    assert_eq!(
        pip["properties"]["ipConfiguration"]["id"],
        format!("{lb}/frontendIPConfigurations/public")
    );
    // Sent back, the computed lists are ignored (the NIC stays deletable once it leaves the pool).
    let again = sim.create(&lb, NET, body.clone()).await;
    assert_eq!(without_etags(&again), without_etags(&body));
}

#[tokio::test]
async fn nic_gets_mac_and_primary_once_a_vm_holds_it() {
    let sim = Sim::start().await;
    let g = "mac";
    sim.network(g).await;
    let nic = sim.nic(g, "nic").await;
    assert!(nic["properties"].get("macAddress").is_none());
    assert!(nic["properties"].get("primary").is_none());
    sim.create(
        &compute(g, "virtualMachines/vm"),
        COMPUTE,
        sim.vm_body(g, "nic"),
    )
    .await;
    let held = sim.get(&net(g, "networkInterfaces/nic"), NET).await.body;
    let mac = held["properties"]["macAddress"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(mac.len(), 17, "{mac}");
    assert!(
        mac.split('-')
            .all(|o| o.len() == 2 && u8::from_str_radix(o, 16).is_ok()),
        "{mac}"
    );
    assert_eq!(held["properties"]["primary"], true);
    // Stable across reads and writes.
    let rewritten = sim
        .create(&net(g, "networkInterfaces/nic"), NET, held.clone())
        .await;
    assert_eq!(rewritten["properties"]["macAddress"], mac.as_str());
    assert_eq!(
        sim.get(&net(g, "networkInterfaces/nic"), NET).await.body["properties"]["macAddress"],
        mac.as_str()
    );
}

#[tokio::test]
async fn data_disks_get_managed_disks() {
    let sim = Sim::start().await;
    let g = "disks";
    sim.network(g).await;
    sim.nic(g, "nic").await;
    let existing = compute(g, "disks/existing");
    let r = sim
        .put(
            &existing,
            "api-version=2024-03-02",
            json!({ "location": "westeurope",
        "sku": { "name": "Premium_LRS" },
        "properties": { "creationData": { "createOption": "Empty" }, "diskSizeGB": 64 } }),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(sim.wait(&r).await, "Succeeded");
    let mut body = sim.vm_body(g, "nic");
    body["properties"]["storageProfile"]["dataDisks"] = json!([
        { "lun": 0, "createOption": "Empty", "diskSizeGB": 32, "deleteOption": "Delete",
          "managedDisk": { "storageAccountType": "StandardSSD_LRS" } },
        { "lun": 1, "createOption": "Attach", "managedDisk": { "id": existing } }
    ]);
    let vm_path = compute(g, "virtualMachines/vm");
    let vm = sim.create(&vm_path, COMPUTE, body.clone()).await;
    let disks = vm["properties"]["storageProfile"]["dataDisks"]
        .as_array()
        .unwrap();
    let empty_id = disks[0]["managedDisk"]["id"].as_str().unwrap().to_string();
    assert!(
        empty_id.contains("/providers/Microsoft.Compute/disks/vm_DataDisk_0_"),
        "{empty_id}"
    );
    let made = sim.get(&empty_id, "api-version=2024-03-02").await.body;
    assert_eq!(made["properties"]["diskSizeGB"], 32);
    assert_eq!(made["sku"]["name"], "StandardSSD_LRS");
    assert_eq!(made["managedBy"], vm_path.as_str());
    assert_eq!(made["properties"]["diskState"], "Attached");
    assert_eq!(disks[1]["managedDisk"]["storageAccountType"], "Premium_LRS");
    assert_eq!(disks[1]["diskSizeGB"], 64);
    assert_eq!(disks[1]["name"], "existing");
    let attached = sim.get(&existing, "api-version=2024-03-02").await.body;
    assert_eq!(attached["managedBy"], vm_path.as_str());
    // The same LUN keeps its disk on update.
    let again = sim.create(&vm_path, COMPUTE, body).await;
    assert_eq!(
        again["properties"]["storageProfile"]["dataDisks"][0]["managedDisk"]["id"],
        empty_id.as_str()
    );
    // deleteOption Delete takes the created disk with the VM; the attached one stays.
    let r = sim.delete(&vm_path, COMPUTE).await;
    assert_eq!(sim.wait(&r).await, "Succeeded");
    assert_eq!(
        sim.get(&empty_id, "api-version=2024-03-02").await.status,
        StatusCode::NOT_FOUND
    );
    let freed = sim.get(&existing, "api-version=2024-03-02").await.body;
    assert!(freed.get("managedBy").is_none(), "{freed}");
    assert_eq!(freed["properties"]["diskState"], "Unattached");
}

#[tokio::test]
async fn a_disk_held_by_one_vm_cannot_be_attached_to_another() {
    let sim = Sim::start().await;
    let g = "shared";
    sim.network(g).await;
    sim.nic(g, "a").await;
    sim.nic(g, "b").await;
    let disk = compute(g, "disks/d");
    sim.create(
        &disk,
        "api-version=2024-03-02",
        json!({ "location": "westeurope",
        "properties": { "creationData": { "createOption": "Empty" }, "diskSizeGB": 8 } }),
    )
    .await;
    let with_disk = |nic: &str| {
        let mut body = sim.vm_body(g, nic);
        body["properties"]["storageProfile"]["dataDisks"] =
            json!([{ "lun": 0, "createOption": "Attach", "managedDisk": { "id": disk } }]);
        body
    };
    sim.create(&compute(g, "virtualMachines/a"), COMPUTE, with_disk("a"))
        .await;
    let r = sim
        .put(&compute(g, "virtualMachines/b"), COMPUTE, with_disk("b"))
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "OperationNotAllowed"),
        "{}",
        r.body
    );
}

/// What a drift detector relies on: GET a resource, send it back (read-only fields stripped as
/// the SDKs do, and also as is), and nothing but etags changes.
#[tokio::test]
async fn get_then_put_back_changes_nothing_but_etags() {
    let sim = Sim::start().await;
    let g = "trip";
    let fleet = fleet(g);
    for (_, path, version, body) in &fleet {
        sim.create(path, version, body.clone()).await;
    }
    for (kind, path, version, _) in &fleet {
        let ext = extract_for(kind);
        let root = ext["roots"][kind].as_str().unwrap();
        for strip in [true, false] {
            let before = sim.get(path, version).await.body;
            let mut sent = before.clone();
            if strip {
                strip_read_only(&ext, root, &mut sent);
            }
            let r = sim.put(path, version, sent).await;
            assert_eq!(
                r.status,
                StatusCode::OK,
                "{kind} (stripped: {strip}): {}",
                r.body
            );
            assert_eq!(sim.wait(&r).await, "Succeeded", "{kind}");
            let after = sim.get(path, version).await.body;
            assert_ne!(
                after["etag"], before["etag"],
                "{kind}: a write gets a new etag"
            );
            assert_eq!(
                without_etags(&after),
                without_etags(&before),
                "{kind} (stripped: {strip}) changed"
            );
        }
    }
}

#[tokio::test]
async fn api_versions_follow_the_providers() {
    let sim = Sim::start().await;
    sim.group("g").await;
    // The VM GET that `az` sends today, and the newest stable versions.
    for (path, version) in [
        (compute("g", "virtualMachines/vm"), "api-version=2024-11-01"),
        (compute("g", "virtualMachines/vm"), "api-version=2025-04-01"),
        (compute("g", "availabilitySets/a"), "api-version=2024-11-01"),
        (compute("g", "disks/d"), "api-version=2025-01-02"),
        (net("g", "virtualNetworks/v"), "api-version=2025-05-01"),
        (net("g", "virtualNetworks/v"), "api-version=2024-07-01"),
        (rg("g"), "api-version=2024-11-01"),
        (rg("g"), "api-version=2025-04-01"),
    ] {
        let r = sim.get(&path, version).await;
        assert_ne!(r.code(), "InvalidApiVersionParameter", "{path} {version}");
    }
    let r = sim
        .get(
            &compute("g", "virtualMachines/vm"),
            "api-version=2099-01-01",
        )
        .await;
    // A resource provider refuses a version it does not serve as ARM does, naming the location
    // (here the group's), the type, its versions and its locations.
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "NoRegisteredProviderFound")
    );
    let message = r.body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "No registered resource provider found for location 'westeurope' and API version \
             '2099-01-01' for type 'virtualMachines'. The supported api-versions are '2025-11-01, \
             2025-04-01, 2024-11-01,"
        ) && message.contains("The supported locations are 'eastus, eastus2,"),
        "{message}"
    );
    // A disk version is not a VM version.
    let r = sim
        .get(
            &compute("g", "virtualMachines/vm"),
            "api-version=2024-03-02",
        )
        .await;
    assert_eq!(r.code(), "NoRegisteredProviderFound");
    // ARM's own types keep ARM's code.
    let r = sim.get(&rg("g"), "api-version=2099-01-01").await;
    assert_eq!(r.code(), "InvalidApiVersionParameter");
}

/// Versions that ARM serves (stable folders of the providers' REST specifications) and the
/// emulator refused until it took its lists from the specifications; and a Compute package tag
/// that is no API version.
#[tokio::test]
async fn api_versions_are_the_rest_specifications_stable_versions() {
    let sim = Sim::start().await;
    sim.network("g").await;
    for (path, version) in [
        (rg("g"), "api-version=2025-03-01"),
        (rg("g"), "api-version=2023-07-01"),
        (rg("g"), "api-version=2019-05-10"),
        (net("g", "virtualNetworks/vnet"), "api-version=2024-10-01"),
        (net("g", "virtualNetworks/vnet"), "api-version=2025-09-01"),
        (net("g", "virtualNetworks/vnet"), "api-version=2022-01-01"),
        (compute("g", "virtualMachines"), "api-version=2025-11-01"),
        (compute("g", "virtualMachines"), "api-version=2022-03-01"),
        (compute("g", "disks"), "api-version=2022-07-02"),
    ] {
        let r = sim.get(&path, version).await;
        assert_eq!(r.status, StatusCode::OK, "{path} {version}: {}", r.body);
    }
    // `package-2025-03-01` bundles Compute 2024-11-01 with disks 2025-01-02.
    let r = sim
        .get(&compute("g", "virtualMachines"), "api-version=2025-03-01")
        .await;
    assert_eq!(r.code(), "NoRegisteredProviderFound", "{}", r.body);
}

/// A route table's routes at their own paths (`routeTables/{t}/routes/{r}`: PUT, GET, LIST,
/// DELETE), and inline in the table, as ARM serves both.
#[tokio::test]
async fn route_table_routes_are_resources_of_their_own() {
    let sim = Sim::start().await;
    sim.group("g").await;
    let table = net("g", "routeTables/rt");
    sim.create(
        &table,
        NET,
        json!({ "location": "westeurope", "properties": { "routes": [
            { "name": "default", "properties": { "addressPrefix": "0.0.0.0/0", "nextHopType": "Internet" } }
        ] } }),
    )
    .await;
    let inline = sim.get(&format!("{table}/routes/default"), NET).await;
    assert_eq!(inline.status, StatusCode::OK, "{}", inline.body);
    assert_eq!(inline.body["id"], json!(format!("{table}/routes/default")));
    assert_eq!(inline.body["properties"]["hasBgpOverride"], json!(false));
    let added = sim
        .create(
            &format!("{table}/routes/peers"),
            NET,
            json!({ "properties": { "addressPrefix": "10.1.0.0/16", "nextHopType": "VnetLocal" } }),
        )
        .await;
    assert_eq!(added["type"], json!("Microsoft.Network/routeTables/routes"));
    let listed = sim.get(&format!("{table}/routes"), NET).await;
    let names: Vec<&str> = listed.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{}", listed.body);
    assert!(names.contains(&"default") && names.contains(&"peers"));
    let shown = sim.get(&table, NET).await.body;
    assert_eq!(shown["properties"]["routes"].as_array().unwrap().len(), 2);
    let gone = sim.delete(&format!("{table}/routes/default"), NET).await;
    assert!(gone.status.is_success(), "{}", gone.body);
    sim.wait(&gone).await;
    let shown = sim.get(&table, NET).await.body;
    let routes = shown["properties"]["routes"].as_array().unwrap();
    assert_eq!(routes.len(), 1, "{shown}");
    assert_eq!(routes[0]["name"], json!("peers"));
}

#[tokio::test]
async fn a_peering_is_initiated_until_the_remote_vnet_peers_back_then_both_are_connected() {
    let sim = Sim::start().await;
    let g = "peering";
    sim.group(g).await;
    let vnet = |name: &str, prefix: &str| {
        (
            net(g, &format!("virtualNetworks/{name}")),
            json!({ "location": "westeurope", "properties": { "addressSpace": { "addressPrefixes": [prefix] } } }),
        )
    };
    let (a, a_body) = vnet("a", "10.0.0.0/16");
    let (b, mut b_body) = vnet("b", "10.1.0.0/16");
    // Only b has a BGP community: a's peering to b shows it (`VirtualNetworkPeeringGet`), b's
    // peering to a shows none.
    b_body["properties"]["bgpCommunities"] = json!({ "virtualNetworkCommunity": "12076:20002" });
    sim.create(&a, NET, a_body).await;
    sim.create(&b, NET, b_body).await;
    let a_to_b = format!("{a}/virtualNetworkPeerings/a-to-b");
    let b_to_a = format!("{b}/virtualNetworkPeerings/b-to-a");

    let first = sim
        .create(
            &a_to_b,
            NET,
            json!({ "properties": { "remoteVirtualNetwork": { "id": b } } }),
        )
        .await;
    assert_eq!(first["properties"]["peeringState"], "Initiated");
    assert_eq!(
        first["properties"]["remoteAddressSpace"]["addressPrefixes"],
        json!(["10.1.0.0/16"])
    );

    let second = sim
        .create(
            &b_to_a,
            NET,
            json!({ "properties": { "remoteVirtualNetwork": { "id": a } } }),
        )
        .await;
    assert_eq!(second["properties"]["peeringState"], "Connected");
    assert!(
        second["properties"].get("remoteBgpCommunities").is_none(),
        "{second}"
    );
    let first = sim.get(&a_to_b, NET).await.body;
    assert_eq!(first["properties"]["peeringState"], "Connected");
    assert_eq!(first["properties"]["peeringSyncLevel"], "FullyInSync");
    assert_eq!(
        first["properties"]["remoteBgpCommunities"],
        json!({ "virtualNetworkCommunity": "12076:20002" })
    );

    let moved = sim
        .put(
            &a_to_b,
            NET,
            json!({ "properties": { "remoteVirtualNetwork": { "id": a } } }),
        )
        .await;
    assert_eq!(moved.status, StatusCode::BAD_REQUEST, "{}", moved.body);
}

#[tokio::test]
async fn a_private_dns_zone_is_global_counts_its_links_and_records_and_outlives_no_link() {
    let sim = Sim::start().await;
    let g = "pdns";
    sim.network(g).await;
    let zone = net(g, "privateDnsZones/c1.capz.io");
    let regional = sim
        .put(&zone, PRIVATE_DNS, json!({ "location": "westeurope" }))
        .await;
    assert_eq!(
        regional.status,
        StatusCode::BAD_REQUEST,
        "{}",
        regional.body
    );
    assert_eq!(regional.code(), "LocationNotAvailableForResourceType");
    let one_label = sim
        .put(
            &net(g, "privateDnsZones/localdomain"),
            PRIVATE_DNS,
            json!({ "location": "global" }),
        )
        .await;
    assert_eq!(
        one_label.code(),
        "InvalidResourceName",
        "{}",
        one_label.body
    );
    let created = sim
        .create(&zone, PRIVATE_DNS, json!({ "location": "global" }))
        .await;
    assert_eq!(
        created["properties"]["numberOfRecordSets"], 1,
        "the SOA set"
    );
    assert_eq!(created["properties"]["numberOfVirtualNetworkLinks"], 0);

    let link = format!("{zone}/virtualNetworkLinks/vnet-link");
    let vnet = net(g, "virtualNetworks/vnet");
    let missing = sim
        .put(
            &link,
            PRIVATE_DNS,
            json!({ "location": "global", "properties": { "virtualNetwork": { "id": net(g, "virtualNetworks/nope") } } }),
        )
        .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST, "{}", missing.body);
    let linked = sim
        .create(
            &link,
            PRIVATE_DNS,
            json!({ "location": "global", "properties": { "virtualNetwork": { "id": vnet } } }),
        )
        .await;
    assert_eq!(linked["properties"]["virtualNetworkLinkState"], "Completed");
    assert_eq!(linked["properties"]["registrationEnabled"], false);
    let twin = sim
        .put(
            &format!("{zone}/virtualNetworkLinks/twin"),
            PRIVATE_DNS,
            json!({ "location": "global", "properties": { "virtualNetwork": { "id": vnet } } }),
        )
        .await;
    assert_eq!(twin.status, StatusCode::CONFLICT, "{}", twin.body);

    let record = format!("{zone}/A/apiserver");
    let bad = sim
        .put(
            &record,
            PRIVATE_DNS,
            json!({ "properties": { "aRecords": [ { "ipv4Address": "fd00::1" } ] } }),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    let made = sim
        .put(
            &record,
            PRIVATE_DNS,
            json!({ "properties": { "ttl": 300, "aRecords": [ { "ipv4Address": "10.0.0.100" } ] } }),
        )
        .await;
    assert_eq!(
        made.status,
        StatusCode::CREATED,
        "record sets answer at once"
    );
    assert_eq!(made.body["properties"]["fqdn"], "apiserver.c1.capz.io.");
    let zone_now = sim.get(&zone, PRIVATE_DNS).await.body;
    assert_eq!(zone_now["properties"]["numberOfRecordSets"], 2);
    assert_eq!(zone_now["properties"]["numberOfVirtualNetworkLinks"], 1);

    // The linked VNet and the zone cannot go while the link exists; the record goes with the zone.
    let vnet_delete = sim.delete(&vnet, NET).await;
    assert_eq!(
        vnet_delete.status,
        StatusCode::BAD_REQUEST,
        "{}",
        vnet_delete.body
    );
    let zone_delete = sim.delete(&zone, PRIVATE_DNS).await;
    assert_eq!(
        zone_delete.status,
        StatusCode::BAD_REQUEST,
        "{}",
        zone_delete.body
    );
    assert_eq!(zone_delete.code(), "CannotDeleteResource");
    let r = sim.delete(&link, PRIVATE_DNS).await;
    assert_eq!(sim.wait(&r).await, "Succeeded");
    let r = sim.delete(&zone, PRIVATE_DNS).await;
    assert!(r.status.is_success(), "{}", r.body);
    assert_eq!(sim.wait(&r).await, "Succeeded");
    assert_eq!(
        sim.get(&record, PRIVATE_DNS).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn a_bastion_host_needs_its_subnet_name_a_standard_ip_and_its_sku_for_tunneling() {
    let sim = Sim::start().await;
    let g = "bastion";
    sim.network(g).await;
    let subnet = net(g, "virtualNetworks/vnet/subnets/AzureBastionSubnet");
    sim.create(
        &subnet,
        NET,
        json!({ "properties": { "addressPrefix": "10.0.255.0/26" } }),
    )
    .await;
    let standard = net(g, "publicIPAddresses/standard");
    sim.create(
        &standard,
        NET,
        json!({ "location": "westeurope", "sku": { "name": "Standard" }, "properties": { "publicIPAllocationMethod": "Static" } }),
    )
    .await;
    let basic = net(g, "publicIPAddresses/basic");
    sim.create(&basic, NET, json!({ "location": "westeurope" }))
        .await;
    let host = net(g, "bastionHosts/bastion");
    let body = |subnet: &str, ip: &str, sku: &str, tunneling: bool| {
        json!({ "location": "westeurope", "sku": { "name": sku }, "properties": {
            "enableTunneling": tunneling,
            "ipConfigurations": [ { "name": "bastionIP", "properties": {
                "subnet": { "id": subnet }, "publicIPAddress": { "id": ip } } } ] } })
    };
    let wrong_subnet = sim
        .put(
            &host,
            NET,
            body(&sim.subnet_id(g), &standard, "Basic", false),
        )
        .await;
    assert_eq!(
        wrong_subnet.code(),
        "SubnetNameMustBeAzureBastionSubnet",
        "{}",
        wrong_subnet.body
    );
    let basic_ip = sim
        .put(&host, NET, body(&subnet, &basic, "Basic", false))
        .await;
    assert_eq!(
        basic_ip.status,
        StatusCode::BAD_REQUEST,
        "{}",
        basic_ip.body
    );
    let tunnel = sim
        .put(&host, NET, body(&subnet, &standard, "Basic", true))
        .await;
    assert_eq!(tunnel.status, StatusCode::BAD_REQUEST, "{}", tunnel.body);

    let made = sim
        .create(&host, NET, body(&subnet, &standard, "Basic", false))
        .await;
    let dns = made["properties"]["dnsName"].as_str().unwrap().to_owned();
    assert!(
        dns.starts_with("bst-") && dns.ends_with(".bastion.azure.com"),
        "{dns}"
    );
    assert_eq!(made["properties"]["scaleUnits"], 2);
    assert_eq!(
        made["properties"]["ipConfigurations"][0]["properties"]["privateIPAllocationMethod"],
        "Dynamic"
    );
    // The DNS name stays what it was through an update.
    let again = sim
        .create(&host, NET, body(&subnet, &standard, "Standard", true))
        .await;
    assert_eq!(again["properties"]["dnsName"], dns.as_str());
    // Its subnet and public IP are held while it exists.
    let ip_delete = sim.delete(&standard, NET).await;
    assert_eq!(
        ip_delete.status,
        StatusCode::BAD_REQUEST,
        "{}",
        ip_delete.body
    );
}

/// What ARM fills in on scale sets and their instances that the emulator left out: placement
/// (`singlePlacementGroup`, `zoneBalance`: `VirtualMachineScaleSet_Create_WithVMsInDifferentZones`
/// and `…_WithEmptyDataDisksOnEachVm`), an instance's tags, etag and `modelDefinitionApplied`
/// (`VirtualMachineScaleSetVM_Get_WithUserData`).
#[tokio::test]
async fn scale_sets_and_their_instances_show_what_arm_fills_in() {
    let sim = Sim::start().await;
    sim.network("g").await;
    let subnet = net("g", "virtualNetworks/vnet/subnets/default");
    let set = |zones: Option<Value>| {
        let mut body = json!({
            "location": "westeurope",
            "tags": { "team": "x" },
            "sku": { "name": "Standard_D2s_v3", "capacity": 1 },
            "properties": { "virtualMachineProfile": {
                "osProfile": { "computerNamePrefix": "pool", "adminUsername": "capi" },
                "storageProfile": { "imageReference": { "publisher": "Canonical", "offer": "ubuntu", "sku": "22_04", "version": "latest" } },
                "networkProfile": { "networkInterfaceConfigurations": [ { "name": "nic", "properties": {
                    "primary": true, "ipConfigurations": [ { "name": "ip", "properties": { "subnet": { "id": subnet } } } ] } } ] }
            } }
        });
        if let Some(z) = zones {
            body["zones"] = z;
        }
        body
    };
    let regional = sim
        .create(
            &compute("g", "virtualMachineScaleSets/regional"),
            COMPUTE,
            set(None),
        )
        .await;
    assert_eq!(regional["properties"]["singlePlacementGroup"], json!(true));
    assert!(
        regional["properties"].get("zoneBalance").is_none(),
        "{regional}"
    );
    let zonal = sim
        .create(
            &compute("g", "virtualMachineScaleSets/zonal"),
            COMPUTE,
            set(Some(json!(["1", "2"]))),
        )
        .await;
    assert_eq!(zonal["properties"]["singlePlacementGroup"], json!(false));
    assert_eq!(zonal["properties"]["zoneBalance"], json!(false));
    let instance = sim
        .get(
            &compute("g", "virtualMachineScaleSets/regional/virtualMachines/0"),
            COMPUTE,
        )
        .await;
    assert_eq!(instance.status, StatusCode::OK, "{}", instance.body);
    assert_eq!(instance.body["tags"], json!({ "team": "x" }));
    assert_eq!(instance.body["etag"], json!("\"1\""));
    assert_eq!(
        instance.body["properties"]["modelDefinitionApplied"],
        json!("VirtualMachineScaleSet")
    );
}

/// The Resource SKUs list as ARM gives it (`ListAvailableResourceSkusForARegion`, 2021-07-01): a
/// VM size's `family` and its full capability list as strings, and each region's availability-set
/// SKUs (`Classic`, `Aligned`) with `MaximumPlatformFaultDomainCount`, which CAPZ reads before it
/// builds an availability set.
#[tokio::test]
async fn resource_skus_show_families_capabilities_and_availability_set_fault_domains() {
    let sim = Sim::start().await;
    let list = |location: &str| {
        format!(
            "/subscriptions/{SUB}/providers/Microsoft.Compute/skus?api-version=2021-07-01&%24filter=location%20eq%20%27{location}%27"
        )
    };
    let r = sim.call(Method::GET, &list("westeurope"), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let skus = r.body["value"].as_array().unwrap();
    let d2 = skus
        .iter()
        .find(|s| s["resourceType"] == "virtualMachines" && s["name"] == "Standard_D2s_v3")
        .unwrap();
    assert_eq!(d2["family"], "standardDSv3Family");
    let names: Vec<&str> = d2["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert!(c["value"].is_string(), "{c}");
            c["name"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        names,
        [
            "MaxResourceVolumeMB",
            "OSVhdSizeMB",
            "vCPUs",
            "HyperVGenerations",
            "MemoryGB",
            "MaxDataDiskCount",
            "LowPriorityCapable",
            "PremiumIO",
            "vCPUsAvailable",
            "ACUs",
            "vCPUsPerCore",
            "EphemeralOSDiskSupported",
            "AcceleratedNetworkingEnabled",
            "RdmaEnabled",
            "MaxNetworkInterfaces",
        ]
    );
    let fault_domains = |skus: &[Value], name: &str| -> String {
        let set = skus
            .iter()
            .find(|s| s["resourceType"] == "availabilitySets" && s["name"] == name)
            .unwrap_or_else(|| panic!("no availabilitySets {name} in {skus:?}"));
        let cap = set["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "MaximumPlatformFaultDomainCount")
            .unwrap();
        cap["value"].as_str().unwrap().to_owned()
    };
    assert_eq!(fault_domains(skus, "Aligned"), "3");
    assert_eq!(fault_domains(skus, "Classic"), "3");
    let r = sim.call(Method::GET, &list("westus2"), None).await;
    assert_eq!(
        fault_domains(r.body["value"].as_array().unwrap(), "Aligned"),
        "2"
    );
}

/// An availability set may have as many fault domains as its region offers (3 in westeurope, 2
/// in westus2); more is ARM's 400 `InvalidParameter` with its message and `target`.
#[tokio::test]
async fn availability_sets_take_the_regions_fault_domains_and_no_more() {
    let sim = Sim::start().await;
    sim.group("g").await;
    let set = |location: &str, faults: i64| {
        json!({ "location": location, "sku": { "name": "Aligned" },
                "properties": { "platformFaultDomainCount": faults } })
    };
    let r = sim
        .put(
            &compute("g", "availabilitySets/three"),
            COMPUTE,
            set("westeurope", 3),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = sim
        .put(
            &compute("g", "availabilitySets/two"),
            COMPUTE,
            set("westus2", 2),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = sim
        .put(
            &compute("g", "availabilitySets/too-many"),
            COMPUTE,
            set("westus2", 3),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(
        r.body["error"],
        json!({
            "code": "InvalidParameter",
            "message": "The specified fault domain count 3 must fall in the range 1 to 2.",
            "target": "platformFaultDomainCount",
            "details": [],
        })
    );
}

/// A VM or scale set booting a Windows image gets ARM's `windowsConfiguration` when the request
/// says nothing of the OS (`VirtualMachine_Create_PlatformImageVmWithUnmanagedOsAndDataDisks`), and
/// data disks without a storage type take the OS disk's (`VirtualMachine_Create_WithEmptyDataDisks`,
/// `VirtualMachineScaleSet_Create_WithEmptyDataDisksOnEachVm`, with `caching: None` and the NIC
/// configuration's fills).
#[tokio::test]
async fn windows_images_get_windows_settings_and_data_disks_the_os_disks_storage() {
    let sim = Sim::start().await;
    sim.network("g").await;
    let nic = sim.nic("g", "win-nic").await;
    let windows = json!({ "publisher": "MicrosoftWindowsServer", "offer": "WindowsServer",
                          "sku": "2022-datacenter", "version": "latest" });
    let vm = sim
        .create(
            &compute("g", "virtualMachines/win"),
            COMPUTE,
            json!({ "location": "westeurope", "properties": {
                "hardwareProfile": { "vmSize": "Standard_D2s_v3" },
                "osProfile": { "computerName": "win", "adminUsername": "capi", "adminPassword": "Pa55w0rd!x" },
                "storageProfile": {
                    "imageReference": windows,
                    "osDisk": { "createOption": "FromImage", "managedDisk": { "storageAccountType": "Standard_LRS" } },
                    "dataDisks": [ { "lun": 0, "createOption": "Empty", "diskSizeGB": 64 } ]
                },
                "networkProfile": { "networkInterfaces": [ { "id": nic["id"] } ] }
            } }),
        )
        .await;
    let props = &vm["properties"];
    assert_eq!(
        props["osProfile"]["windowsConfiguration"],
        json!({ "provisionVMAgent": true, "enableAutomaticUpdates": true }),
        "{vm}"
    );
    assert!(
        props["osProfile"].get("linuxConfiguration").is_none(),
        "{vm}"
    );
    assert_eq!(props["storageProfile"]["osDisk"]["osType"], "Windows");
    let data = &props["storageProfile"]["dataDisks"][0];
    assert_eq!(data["caching"], "None");
    assert_eq!(
        data["managedDisk"]["storageAccountType"], "Standard_LRS",
        "{vm}"
    );

    let subnet = net("g", "virtualNetworks/vnet/subnets/default");
    let set = sim
        .create(
            &compute("g", "virtualMachineScaleSets/win"),
            COMPUTE,
            json!({ "location": "westeurope", "sku": { "name": "Standard_D2s_v3", "capacity": 0 },
                "properties": { "virtualMachineProfile": {
                    "osProfile": { "computerNamePrefix": "win", "adminUsername": "capi" },
                    "storageProfile": {
                        "imageReference": windows,
                        "osDisk": { "createOption": "FromImage", "managedDisk": { "storageAccountType": "Standard_LRS" } },
                        "dataDisks": [ { "lun": 0, "createOption": "Empty", "diskSizeGB": 64 } ]
                    },
                    "networkProfile": { "networkInterfaceConfigurations": [ { "name": "nic", "properties": {
                        "primary": true, "ipConfigurations": [ { "name": "ip", "properties": { "subnet": { "id": subnet } } } ] } } ] }
                } } }),
        )
        .await;
    let profile = &set["properties"]["virtualMachineProfile"];
    assert_eq!(
        profile["osProfile"]["windowsConfiguration"],
        json!({ "provisionVMAgent": true, "enableAutomaticUpdates": true }),
        "{set}"
    );
    let data = &profile["storageProfile"]["dataDisks"][0];
    assert_eq!(data["caching"], "None");
    assert_eq!(
        data["managedDisk"]["storageAccountType"], "Standard_LRS",
        "{set}"
    );
    let nic = &profile["networkProfile"]["networkInterfaceConfigurations"][0]["properties"];
    assert_eq!(nic["dnsSettings"], json!({ "dnsServers": [] }));
    assert_eq!(nic["enableAcceleratedNetworking"], false);
    assert_eq!(
        nic["ipConfigurations"][0]["properties"]["privateIPAddressVersion"],
        "IPv4"
    );
    // A Windows prefix is at most 9 characters, as for a set that sends `windowsConfiguration`.
    let long = sim
        .put(
            &compute("g", "virtualMachineScaleSets/win2"),
            COMPUTE,
            json!({ "location": "westeurope", "sku": { "name": "Standard_D2s_v3", "capacity": 0 },
                "properties": { "virtualMachineProfile": {
                    "osProfile": { "computerNamePrefix": "windows-pool", "adminUsername": "capi" },
                    "storageProfile": { "imageReference": windows },
                    "networkProfile": { "networkInterfaceConfigurations": [ { "name": "nic", "properties": {
                        "primary": true, "ipConfigurations": [ { "name": "ip", "properties": { "subnet": { "id": subnet } } } ] } } ] }
                } } }),
        )
        .await;
    assert_eq!(long.status, StatusCode::BAD_REQUEST, "{}", long.body);
}

/// The parts ARM serves at their own paths though they live inline: a load balancer's frontends,
/// pools, rules, probes, NAT and outbound rules (GET, LIST; pools and NAT rules also PUT and
/// DELETE, which change the load balancer), a NIC's IP configurations and an NSG's default rules
/// (`LoadBalancerLoadBalancingRuleGet`, `InboundNatRuleCreate`, `NetworkInterfaceIPConfigurationGet`,
/// `DefaultSecurityRuleGet`).
#[tokio::test]
async fn inline_parts_are_served_at_their_own_paths() {
    let sim = Sim::start().await;
    let g = "own";
    for (_, path, version, body) in fleet(g).into_iter().take(11) {
        sim.create(&path, version, body).await;
    }
    let lb = net(g, "loadBalancers/lb");
    for (part, name) in [
        ("frontendIPConfigurations", "internal"),
        ("backendAddressPools", "pool"),
        ("loadBalancingRules", "api"),
        ("probes", "probe"),
        ("inboundNatRules", "ssh"),
        ("outboundRules", "out"),
    ] {
        let one = sim.get(&format!("{lb}/{part}/{name}"), NET).await;
        assert_eq!(one.status, StatusCode::OK, "{part}/{name}: {}", one.body);
        assert_eq!(one.body["name"], name);
        assert_eq!(one.body["id"], format!("{lb}/{part}/{name}"));
        assert_eq!(
            one.body["type"],
            format!("Microsoft.Network/loadBalancers/{part}")
        );
        let all = sim.get(&format!("{lb}/{part}"), NET).await;
        assert_eq!(all.status, StatusCode::OK, "{part}: {}", all.body);
        assert!(
            all.body["value"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == name),
            "{part}: {}",
            all.body
        );
    }
    // The rule names its frontend as the load balancer does, with the read-only back-references.
    let rule = sim
        .get(&format!("{lb}/loadBalancingRules/api"), NET)
        .await
        .body;
    assert!(
        rule["properties"]["frontendIPConfiguration"]["id"].is_string(),
        "{rule}"
    );
    let missing = sim.get(&format!("{lb}/probes/none"), NET).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.body);

    // A new pool: 201, then part of the load balancer.
    let pool = format!("{lb}/backendAddressPools/extra");
    let r = sim.put(&pool, NET, json!({ "properties": {} })).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["id"], pool);
    assert_eq!(sim.wait(&r).await, "Succeeded");
    let body = sim.get(&lb, NET).await.body;
    let pools: Vec<&str> = body["properties"]["backendAddressPools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(pools, ["pool", "extra"]);
    // A NAT rule, with the fills a NAT rule sent inline gets.
    let nat = format!("{lb}/inboundNatRules/rdp");
    let frontend = format!("{lb}/frontendIPConfigurations/public");
    let r = sim
        .put(
            &nat,
            NET,
            json!({ "properties": { "frontendIPConfiguration": { "id": frontend },
                    "protocol": "Tcp", "frontendPort": 3389, "backendPort": 3389 } }),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(sim.wait(&r).await, "Succeeded");
    let rdp = sim.get(&nat, NET).await.body;
    assert_eq!(rdp["properties"]["idleTimeoutInMinutes"], 4, "{rdp}");
    // Changed in place: 200.
    let r = sim
        .put(
            &nat,
            NET,
            json!({ "properties": { "frontendIPConfiguration": { "id": frontend },
                    "protocol": "Tcp", "frontendPort": 3390, "backendPort": 3389 } }),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(sim.wait(&r).await, "Succeeded");
    // Deleted: taken out of the load balancer; a second delete finds nothing (204).
    let r = sim.delete(&pool, NET).await;
    assert!(
        [StatusCode::OK, StatusCode::ACCEPTED].contains(&r.status),
        "{}",
        r.body
    );
    assert_eq!(sim.wait(&r).await, "Succeeded");
    assert_eq!(sim.get(&pool, NET).await.status, StatusCode::NOT_FOUND);
    assert_eq!(sim.delete(&pool, NET).await.status, StatusCode::NO_CONTENT);
    // Parts without a CreateOrUpdate of their own are written only with their parent.
    let r = sim
        .put(
            &format!("{lb}/probes/probe"),
            NET,
            json!({ "properties": { "port": 80 } }),
        )
        .await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{}", r.body);

    // A NIC's IP configuration and an NSG's default rule.
    let nic = net(g, "networkInterfaces/nic");
    let ip = sim
        .get(&format!("{nic}/ipConfigurations/ipconfig1"), NET)
        .await;
    assert_eq!(ip.status, StatusCode::OK, "{}", ip.body);
    assert!(
        ip.body["properties"]["privateIPAddress"].is_string(),
        "{}",
        ip.body
    );
    let nsg = fleet(g)
        .into_iter()
        .find(|(kind, ..)| *kind == "Microsoft.Network/networkSecurityGroups")
        .map(|(_, path, ..)| path)
        .unwrap();
    let rule = sim
        .get(&format!("{nsg}/defaultSecurityRules/AllowVnetInBound"), NET)
        .await;
    assert_eq!(rule.status, StatusCode::OK, "{}", rule.body);
    assert_eq!(rule.body["properties"]["access"], "Allow");
    let rules = sim.get(&format!("{nsg}/defaultSecurityRules"), NET).await;
    assert_eq!(rules.body["value"].as_array().unwrap().len(), 6);
}

/// VM, scale-set and scale-set instance extensions are resources below their machine
/// (`VirtualMachineExtension_CreateOrUpdate_MinimumSet_Gen`: a request with only a location is
/// enough): PUT, GET, LIST, PATCH, DELETE, the machine's location, write-only protected settings,
/// and gone with the machine.
#[tokio::test]
async fn extensions_are_resources_below_their_machines() {
    let sim = Sim::start().await;
    let g = "ext";
    sim.network(g).await;
    sim.pip_lb_nic_and_vm(g).await;
    let vm = compute(g, "virtualMachines/vm");
    let ext = format!("{vm}/extensions/bootstrap");
    let body = sim
        .create(
            &ext,
            COMPUTE,
            json!({ "properties": {
                "publisher": "Microsoft.Azure.ContainerUpstream", "type": "CAPZ.Linux.Bootstrapping",
                "typeHandlerVersion": "1.0", "protectedSettings": { "token": "s3cret" } } }),
        )
        .await;
    assert_eq!(body["location"], "westeurope", "{body}");
    assert_eq!(body["type"], "Microsoft.Compute/virtualMachines/extensions");
    assert_eq!(body["properties"]["provisioningState"], "Succeeded");
    assert!(
        body["properties"].get("protectedSettings").is_none(),
        "{body}"
    );
    let minimal = sim
        .put(
            &format!("{vm}/extensions/minimal"),
            COMPUTE,
            json!({ "location": "westeurope" }),
        )
        .await;
    assert_eq!(minimal.status, StatusCode::CREATED, "{}", minimal.body);
    sim.wait(&minimal).await;
    let list = sim.get(&format!("{vm}/extensions"), COMPUTE).await;
    assert_eq!(
        list.body["value"].as_array().unwrap().len(),
        2,
        "{}",
        list.body
    );
    let patched = sim
        .call(
            Method::PATCH,
            &format!("{ext}?{COMPUTE}"),
            Some(json!({ "properties": { "typeHandlerVersion": "1.1" } })),
        )
        .await;
    assert!(patched.status.is_success(), "{}", patched.body);
    sim.wait(&patched).await;
    let now = sim.get(&ext, COMPUTE).await.body;
    assert_eq!(now["properties"]["typeHandlerVersion"], "1.1");
    assert_eq!(now["properties"]["type"], "CAPZ.Linux.Bootstrapping");
    let r = sim
        .delete(&format!("{vm}/extensions/minimal"), COMPUTE)
        .await;
    assert_eq!(sim.wait(&r).await, "Succeeded");
    assert_eq!(
        sim.get(&format!("{vm}/extensions/minimal"), COMPUTE)
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    // A scale set's and an instance's.
    let subnet = net(g, "virtualNetworks/vnet/subnets/default");
    let set = compute(g, "virtualMachineScaleSets/pool");
    sim.create(
        &set,
        COMPUTE,
        json!({ "location": "westeurope", "sku": { "name": "Standard_D2s_v3", "capacity": 1 },
            "properties": { "virtualMachineProfile": {
                "osProfile": { "computerNamePrefix": "pool", "adminUsername": "capi" },
                "storageProfile": { "imageReference": { "publisher": "Canonical", "offer": "ubuntu", "sku": "22_04", "version": "latest" } },
                "networkProfile": { "networkInterfaceConfigurations": [ { "name": "nic", "properties": {
                    "primary": true, "ipConfigurations": [ { "name": "ip", "properties": { "subnet": { "id": subnet } } } ] } } ] }
            } } }),
    )
    .await;
    for path in [
        format!("{set}/extensions/health"),
        format!("{set}/virtualMachines/0/extensions/health"),
    ] {
        let body = sim
            .create(&path, COMPUTE, json!({ "properties": { "publisher": "Microsoft.ManagedServices", "type": "ApplicationHealthLinux" } }))
            .await;
        assert_eq!(body["location"], "westeurope", "{path}: {body}");
    }

    // Deleting the VM deletes its extensions.
    let r = sim.delete(&vm, COMPUTE).await;
    assert_eq!(sim.wait(&r).await, "Succeeded");
    let r = sim.get(&ext, COMPUTE).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
}

/// A private zone's record sets of every type the REST specification has (A, AAAA, CNAME, MX,
/// PTR, SOA, SRV, TXT: `RecordSets_CreateOrUpdate` … `RecordSetAAAAPut`, `RecordSetCNAMEGet`,
/// `RecordSetTXTPatch`), the SOA set a zone is made with (`RecordSetSOAGet`), and `…/ALL`
/// listing them all (`RecordSets_List`).
#[tokio::test]
async fn a_private_zone_has_an_soa_set_and_record_sets_of_every_type() {
    let sim = Sim::start().await;
    let g = "records";
    sim.group(g).await;
    let zone = net(g, "privateDnsZones/example.internal");
    sim.create(&zone, PRIVATE_DNS, json!({ "location": "global" }))
        .await;
    let soa = sim.get(&format!("{zone}/SOA/@"), PRIVATE_DNS).await;
    assert_eq!(soa.status, StatusCode::OK, "{}", soa.body);
    assert_eq!(soa.body["properties"]["fqdn"], "example.internal.");
    assert_eq!(
        soa.body["properties"]["soaRecord"]["host"],
        "azureprivatedns.net"
    );
    let count = |body: &Value| body["properties"]["numberOfRecordSets"].clone();
    assert_eq!(count(&sim.get(&zone, PRIVATE_DNS).await.body), 1);

    for (ty, name, props) in [
        (
            "AAAA",
            "v6",
            json!({ "aaaaRecords": [ { "ipv6Address": "fd00::4" } ] }),
        ),
        (
            "CNAME",
            "www",
            json!({ "cnameRecord": { "cname": "api.example.internal" } }),
        ),
        (
            "MX",
            "@",
            json!({ "mxRecords": [ { "preference": 10, "exchange": "mail.example.internal" } ] }),
        ),
        (
            "PTR",
            "4",
            json!({ "ptrRecords": [ { "ptrdname": "api.example.internal" } ] }),
        ),
        (
            "SRV",
            "_etcd._tcp",
            json!({ "srvRecords": [ { "priority": 0, "weight": 10, "port": 2379, "target": "cp.example.internal" } ] }),
        ),
        (
            "TXT",
            "owner",
            json!({ "txtRecords": [ { "value": ["strata"] } ] }),
        ),
    ] {
        let path = format!("{zone}/{ty}/{name}");
        let body = sim
            .create(&path, PRIVATE_DNS, json!({ "properties": props }))
            .await;
        assert_eq!(
            body["type"],
            format!("Microsoft.Network/privateDnsZones/{ty}")
        );
        assert_eq!(body["properties"]["ttl"], 3600, "{body}");
        let fqdn = if name == "@" {
            "example.internal.".to_string()
        } else {
            format!("{name}.example.internal.")
        };
        assert_eq!(body["properties"]["fqdn"], fqdn.as_str());
        let listed = sim.get(&format!("{zone}/{ty}"), PRIVATE_DNS).await;
        assert_eq!(listed.body["value"].as_array().unwrap().len(), 1, "{ty}");
    }
    let bad = sim
        .put(
            &format!("{zone}/AAAA/bad"),
            PRIVATE_DNS,
            json!({ "properties": { "aaaaRecords": [ { "ipv6Address": "10.0.0.1" } ] } }),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    let second_soa = sim
        .put(
            &format!("{zone}/SOA/other"),
            PRIVATE_DNS,
            json!({ "properties": {} }),
        )
        .await;
    assert_eq!(
        second_soa.status,
        StatusCode::BAD_REQUEST,
        "{}",
        second_soa.body
    );

    let all = sim.get(&format!("{zone}/ALL"), PRIVATE_DNS).await;
    assert_eq!(all.status, StatusCode::OK, "{}", all.body);
    let mut types: Vec<&str> = all.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["type"]
                .as_str()
                .unwrap()
                .trim_start_matches("Microsoft.Network/privateDnsZones/")
        })
        .collect();
    types.sort_unstable();
    assert_eq!(types, ["AAAA", "CNAME", "MX", "PTR", "SOA", "SRV", "TXT"]);
    assert_eq!(count(&sim.get(&zone, PRIVATE_DNS).await.body), 7);
}

/// Collections ARM computes below a resource: a group's resources (`Resources_ListByResourceGroup`,
/// envelopes only), an availability set's VM sizes (`AvailabilitySets_ListAvailableSizes`), the
/// NICs behind a load balancer and the load balancers in front of a NIC
/// (`LoadBalancerNetworkInterfaceListSimple`, `NetworkInterfaceLoadBalancerList`).
#[tokio::test]
async fn computed_collections_list_a_groups_resources_sizes_and_load_balancer_nics() {
    let sim = Sim::start().await;
    let g = "lists";
    for (_, path, version, body) in fleet(g).into_iter().take(14) {
        sim.create(&path, version, body).await;
    }
    let r = sim.get(&format!("{}/resources", rg(g)), RES).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let listed = r.body["value"].as_array().unwrap();
    let ids: Vec<&str> = listed.iter().map(|x| x["id"].as_str().unwrap()).collect();
    let lb = net(g, "loadBalancers/lb");
    assert!(ids.contains(&lb.as_str()), "{ids:?}");
    assert!(
        ids.iter().all(|id| !id.contains("/subnets/")),
        "nested resources are not listed: {ids:?}"
    );
    assert!(listed.iter().all(|x| x.get("properties").is_none()));
    let missing = sim.get(&format!("{}/resources", rg("nowhere")), RES).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.body);

    let nic = net(g, "networkInterfaces/nic");
    let behind = sim.get(&format!("{lb}/networkInterfaces"), NET).await;
    assert_eq!(behind.status, StatusCode::OK, "{}", behind.body);
    let nics: Vec<&str> = behind.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(nics, [nic.as_str()]);
    let in_front = sim.get(&format!("{nic}/loadBalancers"), NET).await;
    assert_eq!(in_front.status, StatusCode::OK, "{}", in_front.body);
    assert_eq!(in_front.body["value"][0]["id"], lb.as_str());
    assert_eq!(in_front.body["value"].as_array().unwrap().len(), 1);

    sim.create(
        &compute(g, "availabilitySets/set"),
        COMPUTE,
        json!({ "location": "westeurope" }),
    )
    .await;
    let sizes = sim
        .get(
            &format!("{}/vmSizes", compute(g, "availabilitySets/set")),
            COMPUTE,
        )
        .await;
    assert_eq!(sizes.status, StatusCode::OK, "{}", sizes.body);
    let d2 = sizes.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "Standard_D2s_v3")
        .unwrap()
        .clone();
    assert_eq!(d2["numberOfCores"], 2);
    assert_eq!(d2["memoryInMB"], 8192);
    let vm = fleet(g)
        .into_iter()
        .find(|(kind, ..)| *kind == "Microsoft.Compute/virtualMachines")
        .map(|(_, path, ..)| path)
        .unwrap();
    let r = sim.get(&format!("{vm}/vmSizes"), COMPUTE).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["value"], sizes.body["value"]);
}
