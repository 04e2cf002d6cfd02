//! A machine's image and the purchase plan it needs, as CAPZ's image converter makes them, and
//! the default image of a Windows machine.

use strata_crds::azure::{self, *};
use strata_crds::capz;

use super::vm::arm_id_ok;
use super::{DEFAULT_IMAGE, DEFAULT_PUBLIC_GALLERY, DEFAULT_WINDOWS_IMAGE, Input};
use crate::InputError;

/// CAPZ's default image of a Windows machine (azure/services/virtualmachineimages
/// `GetDefaultWindowsImage`): its community gallery's `capi-win-2019-containerd` image (the
/// year from the `windowsServerVersion` annotation `windows-<year>`) at the Machine's Kubernetes
/// version; the `runtime` annotation may only ask for containerd.
pub(super) fn windows_default_image(
    i: &Input,
    note: &mut impl FnMut(&str, &str),
) -> Result<Image, InputError> {
    let annotations = i.azure_machine.metadata.annotations.as_ref();
    let annotation = |k: &str| annotations.and_then(|a| a.get(k)).map(String::as_str);
    if let Some(runtime) = annotation("runtime").filter(|r| !r.is_empty() && *r != "containerd") {
        return Err(i.err(
            "metadata.annotations.runtime",
            format!("unsupported runtime {runtime:?}: Windows machines run containerd"),
        ));
    }
    let mut name = DEFAULT_WINDOWS_IMAGE.to_owned();
    if let Some(os) = annotation("windowsServerVersion").filter(|v| !v.is_empty()) {
        let year = os
            .strip_prefix("windows-")
            .filter(|y| y.len() == 4 && y.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| {
                i.err(
                    "metadata.annotations.windowsServerVersion",
                    format!("unsupported {os:?}: windows-<year> such as windows-2022"),
                )
            })?;
        name = name.replace("2019", year);
    }
    let version = match i.machine.spec.version.as_deref() {
        Some(v) => v.trim_start_matches('v').to_owned(),
        None => {
            note(
                "spec.image",
                "not set and the Machine names no Kubernetes version: the latest Windows image is used",
            );
            "latest".to_owned()
        }
    };
    Ok(Image {
        community_gallery: Some(CommunityGalleryImage {
            gallery: DEFAULT_PUBLIC_GALLERY.to_owned(),
            name,
            version,
        }),
        ..Default::default()
    })
}

/// The VM's image and the purchase plan it needs, as CAPZ's image converter makes them
/// (azure/converters/image.go): a compute gallery image without subscription and resource group
/// is a community gallery image; a marketplace image from a third party, or a gallery image with
/// a plan, carries the plan.
pub(super) fn image(
    spec: Option<&capz::ImageSpec>,
    err: &impl Fn(&str, String) -> InputError,
    note: &mut impl FnMut(&str, &str),
) -> Result<(Image, Option<PurchasePlan>), InputError> {
    let Some(spec) = spec else {
        note(
            "spec.image",
            "not set: CAPZ looks the reference image for the Kubernetes version up in Azure, \
             which the translator never calls; cncf-upstream/capi/ubuntu-2204-gen1 latest is used",
        );
        return Ok((
            Image {
                marketplace: Some(MarketplaceImage {
                    publisher: DEFAULT_IMAGE.0.to_owned(),
                    offer: DEFAULT_IMAGE.1.to_owned(),
                    sku: DEFAULT_IMAGE.2.to_owned(),
                    version: "latest".to_owned(),
                }),
                ..Default::default()
            },
            None,
        ));
    };
    if let Some(id) = &spec.id {
        if !arm_id_ok(id) {
            return Err(err("spec.image.id", "not an ARM resource ID".into()));
        }
        return Ok((
            Image {
                id: Some(id.clone()),
                ..Default::default()
            },
            None,
        ));
    }
    let bounded = |v: &str, max: usize, f: &str| -> Result<String, InputError> {
        if v.is_empty() || v.len() > max {
            Err(err(f, format!("must be 1 to {max} characters")))
        } else {
            Ok(v.to_owned())
        }
    };
    let plan =
        |publisher: &str, product: &str, name: &str, f: &str| -> Result<PurchasePlan, InputError> {
            Ok(PurchasePlan {
                name: bounded(name, 128, &format!("{f}.sku"))?,
                publisher: bounded(publisher, 128, &format!("{f}.publisher"))?,
                product: bounded(product, 128, &format!("{f}.offer"))?,
            })
        };
    if let Some(m) = &spec.marketplace {
        let image = MarketplaceImage {
            publisher: bounded(&m.publisher, 128, "spec.image.marketplace.publisher")?,
            offer: bounded(&m.offer, 128, "spec.image.marketplace.offer")?,
            sku: bounded(&m.sku, 128, "spec.image.marketplace.sku")?,
            version: bounded(&m.version, 64, "spec.image.marketplace.version")?,
        };
        // A third party's image needs the plan named after it (publisher, offer as product,
        // SKU as name).
        let plan = (m.third_party_image == Some(true))
            .then(|| plan(&m.publisher, &m.offer, &m.sku, "spec.image.marketplace"))
            .transpose()?;
        return Ok((
            Image {
                marketplace: Some(image),
                ..Default::default()
            },
            plan,
        ));
    }
    if let Some(g) = &spec.compute_gallery {
        let gallery = bounded(&g.gallery, 128, "spec.image.computeGallery.gallery")?;
        let name = bounded(&g.name, 80, "spec.image.computeGallery.name")?;
        let version = bounded(&g.version, 64, "spec.image.computeGallery.version")?;
        let plan = g
            .plan
            .as_ref()
            .map(|p| {
                plan(
                    &p.publisher,
                    &p.offer,
                    &p.sku,
                    "spec.image.computeGallery.plan",
                )
            })
            .transpose()?;
        let image = match (&g.subscription_id, &g.resource_group) {
            (Some(subscription), Some(resource_group)) => Image {
                compute_gallery: Some(azure::ComputeGalleryImage {
                    gallery: bounded(&gallery, 80, "spec.image.computeGallery.gallery")?,
                    name,
                    version,
                    subscription_id: Some(subscription.clone()),
                    resource_group: Some(resource_group.clone()),
                }),
                ..Default::default()
            },
            // Without both, CAPZ takes the gallery for a community gallery's public name.
            _ => {
                for (part, what) in [
                    (&gallery, "gallery"),
                    (&name, "name"),
                    (&version, "version"),
                ] {
                    if part.contains('/') {
                        return Err(err(
                            &format!("spec.image.computeGallery.{what}"),
                            "must not contain '/'".into(),
                        ));
                    }
                }
                Image {
                    community_gallery: Some(CommunityGalleryImage {
                        gallery,
                        name,
                        version,
                    }),
                    ..Default::default()
                }
            }
        };
        return Ok((image, plan));
    }
    if let Some(g) = &spec.shared_gallery {
        let f = "spec.image.sharedGallery";
        // The plan's three fields come together or not at all (CAPZ: all set means a plan).
        let plan = match (&g.publisher, &g.offer, &g.sku) {
            (Some(p), Some(o), Some(s)) => Some(plan(p, o, s, f)?),
            _ => None,
        };
        return Ok((
            Image {
                compute_gallery: Some(azure::ComputeGalleryImage {
                    gallery: bounded(&g.gallery, 80, &format!("{f}.gallery"))?,
                    name: bounded(&g.name, 80, &format!("{f}.name"))?,
                    version: bounded(&g.version, 64, &format!("{f}.version"))?,
                    subscription_id: Some(bounded(
                        &g.subscription_id,
                        64,
                        &format!("{f}.subscriptionID"),
                    )?),
                    resource_group: Some(bounded(
                        &g.resource_group,
                        90,
                        &format!("{f}.resourceGroup"),
                    )?),
                }),
                ..Default::default()
            },
            plan,
        ));
    }
    Err(err(
        "spec.image",
        "one of id, marketplace, computeGallery or sharedGallery is required".into(),
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn image_of(json: serde_json::Value) -> Result<(Image, Option<PurchasePlan>), InputError> {
        let spec: capz::ImageSpec = serde_json::from_value(json).unwrap();
        let err = |field: &str, message: String| InputError {
            object: "AzureMachine ns/m".into(),
            field: field.into(),
            message,
        };
        image(Some(&spec), &err, &mut |_: &str, _: &str| {})
    }

    #[test]
    fn gallery_images_are_private_community_or_shared_as_in_capz() {
        // Without subscription and resource group: a community gallery's public name.
        let (img, plan) = image_of(serde_json::json!({ "computeGallery": {
            "gallery": "flatcar4capi", "name": "flatcar", "version": "1.0.0",
            "plan": { "publisher": "kinvolk", "offer": "flatcar-free", "sku": "stable" } } }))
        .unwrap();
        assert_eq!(
            img.community_gallery,
            Some(CommunityGalleryImage {
                gallery: "flatcar4capi".into(),
                name: "flatcar".into(),
                version: "1.0.0".into()
            })
        );
        assert_eq!(
            plan,
            Some(PurchasePlan {
                name: "stable".into(),
                publisher: "kinvolk".into(),
                product: "flatcar-free".into()
            })
        );
        // Only one of the two is still a community image (CAPZ needs both for a private one).
        let (img, _) = image_of(serde_json::json!({ "computeGallery": {
            "gallery": "g", "name": "n", "version": "1", "subscriptionID": "s" } }))
        .unwrap();
        assert!(img.community_gallery.is_some() && img.compute_gallery.is_none());
        let (img, plan) = image_of(serde_json::json!({ "computeGallery": {
            "gallery": "g", "name": "n", "version": "1", "subscriptionID": "s", "resourceGroup": "rg" } }))
        .unwrap();
        assert!(img.compute_gallery.is_some() && plan.is_none());
        // A shared gallery is a private gallery; its inline publisher/offer/sku are the plan.
        let (img, plan) = image_of(serde_json::json!({ "sharedGallery": {
            "gallery": "g", "name": "n", "version": "1", "subscriptionID": "s", "resourceGroup": "rg",
            "publisher": "p", "offer": "o", "sku": "k" } }))
        .unwrap();
        let g = img.compute_gallery.unwrap();
        assert_eq!(
            (g.subscription_id.as_deref(), g.resource_group.as_deref()),
            (Some("s"), Some("rg"))
        );
        assert_eq!(plan.unwrap().product, "o");
        // A third party's marketplace image carries its plan; CAPZ's own images do not.
        let third = |third: bool| {
            image_of(
                serde_json::json!({ "marketplace": { "publisher": "p", "offer": "o",
                "sku": "k", "version": "latest", "thirdPartyImage": third } }),
            )
            .unwrap()
            .1
        };
        assert_eq!(
            third(true),
            Some(PurchasePlan {
                name: "k".into(),
                publisher: "p".into(),
                product: "o".into()
            })
        );
        assert_eq!(third(false), None);
        let bad = image_of(serde_json::json!({ "computeGallery": {
            "gallery": "a/b", "name": "n", "version": "1" } }))
        .unwrap_err();
        assert_eq!(bad.field, "spec.image.computeGallery.gallery");
    }
}
