//! Extensions (published definitions, server-wide) and their apps in a workspace: installed with a
//! provider credential, granted to agents, revoked.

use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::json;

use super::{Answer, OperatorJson, Workspace, known, unknown};
use crate::contract::ActionError;
use crate::contract::error::ErrorCode;
use crate::server::failure;
use crate::server::state::AppState;
use crate::wire::Data;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewExtensionVersion {
    definition: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Nothing {}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewApp {
    extension: String,
    base_url: String,
    credential: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct NewGrant {
    agent_id: String,
}

/// The longest app credential the server stores.
const MAX_CREDENTIAL_BYTES: usize = 4096;

/// `POST /admin/extensions`: records the definition as its extension's next version (the first
/// for a new name) with its digest, and advances the catalog version.
pub(super) async fn publish_extension(
    State(state): State<AppState>,
    OperatorJson(NewExtensionVersion { definition }): OperatorJson<NewExtensionVersion>,
) -> Answer {
    let (checked, digest) =
        crate::server::extension_rules::check_publish(&definition).map_err(|problems| {
            ActionError::new(
                ErrorCode::ValidationFailed,
                format!("the definition breaks {} rule(s)", problems.len()),
            )
            .with_details(
                problems
                    .into_iter()
                    .take(32)
                    .map(|message| crate::contract::error::ErrorDetail {
                        path: "/definition".into(),
                        message: message.chars().take(512).collect(),
                    })
                    .collect(),
            )
        })?;
    let recorded = state
        .store
        .publish_extension(
            &checked.name,
            checked.provider.as_str(),
            &definition,
            &digest,
            false,
            state.clock.now_ms(),
        )
        .await
        .map_err(failure::store)?
        .expect("a publish that is not a seed always records");
    tracing::info!(extension = %recorded.name, version = recorded.version, digest = %recorded.digest, catalog_version = recorded.catalog_version, "extension published");
    Ok(Data(json!({
        "name": recorded.name,
        "version": recorded.version,
        "digest": recorded.digest,
        "catalogVersion": recorded.catalog_version,
    })))
}

/// `POST /admin/extensions/list`: every extension's current version.
pub(super) async fn list_extensions(
    State(state): State<AppState>,
    OperatorJson(Nothing {}): OperatorJson<Nothing>,
) -> Answer {
    let current = state
        .store
        .current_extensions()
        .await
        .map_err(failure::store)?;
    Ok(Data(json!({
        "extensions": current.iter().map(|(recorded, provider)| json!({
            "name": recorded.name,
            "provider": provider,
            "version": recorded.version,
            "digest": recorded.digest,
            "catalogVersion": recorded.catalog_version,
        })).collect::<Vec<_>>(),
    })))
}

/// `POST …/apps`: installs (or reinstalls) an extension's app in the workspace.
pub(super) async fn install_app(
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    OperatorJson(NewApp {
        extension,
        base_url,
        credential,
    }): OperatorJson<NewApp>,
) -> Answer {
    known::<Workspace>(&state, &workspace_id, &[&workspace_id]).await?;
    let base_url = crate::server::provider::check_base_url(&base_url)
        .map_err(|why| ActionError::new(ErrorCode::ValidationFailed, why))?;
    let credential_ok = !credential.is_empty()
        && credential.len() <= MAX_CREDENTIAL_BYTES
        && credential.bytes().all(|b| b.is_ascii_graphic());
    if !credential_ok {
        return Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("`credential` must be 1 to {MAX_CREDENTIAL_BYTES} printable ASCII characters without spaces"),
        )
        .into());
    }
    let installed = state
        .store
        .install_app(
            &workspace_id,
            &extension,
            &base_url,
            &credential,
            state.clock.now_ms(),
        )
        .await
        .map_err(failure::store)?;
    if !installed {
        return Err(unknown("extension", &extension).into());
    }
    Ok(Data(
        json!({ "extension": extension, "baseUrl": base_url, "status": "installed" }),
    ))
}

/// `POST …/apps/{extension}/grants`: allows an agent of the workspace to use the app.
pub(super) async fn grant_app(
    State(state): State<AppState>,
    Path((workspace_id, extension)): Path<(String, String)>,
    OperatorJson(NewGrant { agent_id }): OperatorJson<NewGrant>,
) -> Answer {
    let granted = state
        .store
        .grant_app(&workspace_id, &extension, &agent_id, state.clock.now_ms())
        .await
        .map_err(failure::store)?;
    if !granted {
        return Err(ActionError::new(
            ErrorCode::NotFound,
            format!("the `{extension}` app is not installed in this workspace, or it has no agent `{agent_id}`"),
        )
        .into());
    }
    Ok(Data(json!({ "extension": extension, "agentId": agent_id })))
}

/// `POST …/apps/{extension}/revoke`: deletes the app's credential; calls are refused until it is
/// installed again.
pub(super) async fn revoke_app(
    State(state): State<AppState>,
    Path((workspace_id, extension)): Path<(String, String)>,
    OperatorJson(Nothing {}): OperatorJson<Nothing>,
) -> Answer {
    let revoked = state
        .store
        .revoke_app(&workspace_id, &extension, state.clock.now_ms())
        .await
        .map_err(failure::store)?;
    if !revoked {
        return Err(ActionError::new(
            ErrorCode::NotFound,
            format!("the `{extension}` app is not installed in this workspace"),
        )
        .into());
    }
    Ok(Data(json!({ "extension": extension, "status": "revoked" })))
}
