"""The approval service: `countersign serve` (issue 11).

One process owns a ledger and a policy and lets agents on other machines, and reviewers at a
browser or a script, reach them over HTTP. Agents propose calls and wait for decisions;
reviewers list, read and answer requests; every decision the service records is signed with the
service's key, attesting the reviewer it authenticated (docs/ledger-format.md section 11).

Layers (nothing here imports the CLI; the CLI's `serve` only parses options and calls `run`):

    service.errors    the stable error codes and HTTP statuses of every refusal
    service.auth      who is calling: a roster token (Authorization: Bearer) or a web session
    service.core      the Service: one shared Gate on the ledger, waiting, reload, history
    service.api       the JSON API under /v1 (agents, reviewers, admins)
    service.openapi   the OpenAPI 3.1 document of that API
    service.app       the Starlette application, its lifespan and its signal handling
    service.webhooks  the webhooks file of `serve --webhooks` (TOML)
    service.notify_bodies  a notification's bodies (generic, Slack) and their HMAC signature
    service.notify    the Notifier: the watch's listener, the delivery worker, the deliveries file
                      and the cursor (docs/notifications.md)
"""
