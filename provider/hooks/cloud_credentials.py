"""Storage options for delta-rs from the cloud connections a deployment already has.

A ``delta`` connection may name an Amazon Web Services connection (extra ``aws_conn_id``) instead of
holding keys itself; its credentials are resolved through the Amazon provider's own hook, so whatever that
connection is set up to do (static keys, a role to assume, a profile, the instance's role) works as it does
for the provider's operators. Keys written in the ``delta`` connection's storage options win over resolved
ones.
"""

from __future__ import annotations

from typing import Any

#: the ``delta`` connection extra naming an ``aws`` connection
AWS_CONN_EXTRA = "aws_conn_id"


def aws_storage_options(aws_conn_id: str) -> dict[str, str]:
    """delta-rs ``AWS_*`` storage options from an Airflow ``aws`` connection.

    The credentials are the connection's current ones; temporary credentials (an assumed role) are not
    refreshed during a write, so the role's session must outlast the longest write.

    :param aws_conn_id: the ``aws`` connection id.
    :raises ValueError: if the Amazon provider is not installed or the connection cannot give credentials.
    """
    try:
        from airflow.providers.amazon.aws.hooks.base_aws import AwsGenericHook
    except ImportError:
        raise ValueError(
            f"delta connection names aws_conn_id={aws_conn_id!r}, but the Amazon provider is not installed: "
            "pip install 'airflow-provider-deltaguard[aws]'"
        ) from None
    hook: Any = AwsGenericHook(aws_conn_id=aws_conn_id, client_type="s3")
    try:
        credentials = hook.get_credentials()
    except Exception as exc:  # botocore and the hook raise many kinds; the cause is in the message
        raise ValueError(f"aws connection {aws_conn_id!r} gave no credentials: {exc}") from exc
    if credentials is None or not credentials.access_key:
        raise ValueError(f"aws connection {aws_conn_id!r} gave no credentials")
    options = {
        "AWS_ACCESS_KEY_ID": credentials.access_key,
        "AWS_SECRET_ACCESS_KEY": credentials.secret_key,
    }
    if credentials.token:
        options["AWS_SESSION_TOKEN"] = credentials.token
    region = hook.conn_region_name
    if region:
        options["AWS_REGION"] = str(region)
    endpoint = hook.conn_config.endpoint_url
    if endpoint:
        options["AWS_ENDPOINT_URL"] = str(endpoint)
        if str(endpoint).lower().startswith("http://"):
            # delta-rs refuses plain HTTP unless told; an http endpoint in the connection is that choice
            options["AWS_ALLOW_HTTP"] = "true"
    return options
