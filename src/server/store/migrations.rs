//! The server's schema, as append-only lists of migrations: one for SQLite (applied under
//! `PRAGMA user_version`) and the same for PostgreSQL (applied under `schema_migrations`, each
//! behind an advisory lock).
//!
//! Never edit or remove an entry: a database at version N has run exactly the first N. Both lists
//! have the same entries in the same order; times are BIGINT epoch milliseconds so ordering is
//! identical on both.

/// Each entry is one migration; its index + 1 is the `user_version` after it ran.
pub const MIGRATIONS: &[&str] = &[
    // 1: tenancy, identity, conversation locators, tasks and reviews.
    r#"
    CREATE TABLE server_keys (
        name TEXT PRIMARY KEY,
        secret BLOB NOT NULL
    );
    CREATE TABLE workspaces (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        created_at BIGINT NOT NULL
    );
    CREATE TABLE humans (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        handle TEXT NOT NULL,
        display_name TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (workspace_id, handle)
    );
    CREATE TABLE agents (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        owner_human_id TEXT NOT NULL REFERENCES humans(id),
        handle TEXT NOT NULL,
        display_name TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (workspace_id, handle)
    );
    CREATE TABLE devices (
        id TEXT PRIMARY KEY,
        human_id TEXT NOT NULL REFERENCES humans(id),
        secret_hash BLOB NOT NULL,
        created_at BIGINT NOT NULL,
        revoked_at BIGINT
    );
    CREATE TABLE channels (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        name TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (workspace_id, name)
    );
    CREATE TABLE channel_members (
        channel_id TEXT NOT NULL REFERENCES channels(id),
        member_id TEXT NOT NULL,
        PRIMARY KEY (channel_id, member_id)
    );
    CREATE TABLE threads (
        id TEXT PRIMARY KEY,
        channel_id TEXT NOT NULL REFERENCES channels(id),
        title TEXT NOT NULL,
        created_at BIGINT NOT NULL
    );
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        channel_id TEXT NOT NULL REFERENCES channels(id),
        thread_id TEXT REFERENCES threads(id),
        title TEXT NOT NULL,
        description TEXT,
        status TEXT NOT NULL CHECK (status IN ('open', 'claimed', 'completed', 'cancelled')),
        assignee_agent_id TEXT REFERENCES agents(id),
        created_by_agent_id TEXT REFERENCES agents(id),
        result TEXT,
        cancel_reason TEXT,
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX tasks_by_location ON tasks (channel_id, thread_id, updated_at DESC, id ASC);
    CREATE TABLE reviews (
        id TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL REFERENCES threads(id),
        task_id TEXT REFERENCES tasks(id),
        author_agent_id TEXT NOT NULL REFERENCES agents(id),
        verdict TEXT NOT NULL CHECK (verdict IN ('comment', 'approve', 'requestChanges')),
        body TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('open', 'resolved')),
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX reviews_by_thread ON reviews (thread_id, updated_at DESC, id DESC);
    CREATE TABLE idempotency_keys (
        agent_id TEXT NOT NULL REFERENCES agents(id),
        action TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        fingerprint BLOB NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('running', 'done')),
        status_code BIGINT,
        response TEXT,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (agent_id, action, idempotency_key)
    );
    CREATE INDEX idempotency_by_age ON idempotency_keys (created_at);
    "#,
    // 2: projects, teams, messages and scheduled messages with their runs.
    r#"
    CREATE TABLE projects (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        name TEXT NOT NULL,
        description TEXT,
        status TEXT NOT NULL CHECK (status IN ('active', 'archived')),
        created_by_agent_id TEXT REFERENCES agents(id),
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX projects_by_update ON projects (workspace_id, updated_at DESC, id ASC);
    CREATE INDEX projects_by_status ON projects (workspace_id, status, updated_at DESC, id ASC);
    CREATE TABLE teams (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        handle TEXT NOT NULL,
        display_name TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (workspace_id, handle)
    );
    CREATE INDEX teams_by_name ON teams (workspace_id, display_name, handle, id);
    CREATE TABLE team_members (
        team_id TEXT NOT NULL REFERENCES teams(id),
        member_kind TEXT NOT NULL CHECK (member_kind IN ('human', 'agent')),
        member_id TEXT NOT NULL,
        PRIMARY KEY (team_id, member_id)
    );
    CREATE TABLE messages (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        channel_id TEXT NOT NULL REFERENCES channels(id),
        thread_id TEXT REFERENCES threads(id),
        author_id TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at BIGINT NOT NULL
    );
    CREATE INDEX messages_by_location ON messages (channel_id, thread_id, created_at DESC, id DESC);
    CREATE TABLE scheduled_messages (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        channel_id TEXT NOT NULL REFERENCES channels(id),
        thread_id TEXT REFERENCES threads(id),
        content TEXT NOT NULL,
        send_at BIGINT NOT NULL,
        repeat_every_minutes BIGINT,
        next_run_at BIGINT,
        status TEXT NOT NULL CHECK (status IN ('scheduled', 'done', 'cancelled')),
        created_by_agent_id TEXT NOT NULL REFERENCES agents(id),
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX schedules_by_location ON scheduled_messages (channel_id, thread_id, created_at DESC, id DESC);
    CREATE INDEX schedules_due ON scheduled_messages (status, next_run_at);
    CREATE TABLE scheduled_runs (
        id TEXT PRIMARY KEY,
        scheduled_message_id TEXT NOT NULL REFERENCES scheduled_messages(id),
        status TEXT NOT NULL CHECK (status IN ('pending', 'sent', 'failed')),
        created_at BIGINT NOT NULL,
        attempted_at BIGINT,
        message_id TEXT REFERENCES messages(id),
        failure TEXT
    );
    CREATE INDEX runs_by_schedule ON scheduled_runs (scheduled_message_id, (COALESCE(attempted_at, created_at)) DESC, id DESC);
    "#,
    // 3: direct conversations (channels of kind `dm`), reactions and attachments.
    r#"
    ALTER TABLE channels ADD COLUMN kind TEXT NOT NULL DEFAULT 'channel' CHECK (kind IN ('channel', 'dm'));
    CREATE TABLE reactions (
        message_id TEXT NOT NULL REFERENCES messages(id),
        emoji TEXT NOT NULL,
        member_id TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (message_id, emoji, member_id)
    );
    CREATE TABLE attachments (
        id TEXT PRIMARY KEY,
        message_id TEXT NOT NULL REFERENCES messages(id),
        position BIGINT NOT NULL,
        name TEXT NOT NULL,
        media_type TEXT NOT NULL,
        size BIGINT NOT NULL,
        content BLOB NOT NULL,
        created_at BIGINT NOT NULL
    );
    CREATE INDEX attachments_by_message ON attachments (message_id, position);
    "#,
    // 4: the scheduler's pending runs, found without scanning the whole run history.
    r#"
    CREATE INDEX runs_pending ON scheduled_runs (created_at, id) WHERE status = 'pending';
    "#,
    // 5: public agent profiles, workflows (plans and their versions, triggers, runs, steps, run
    // logs) and approvals.
    r#"
    ALTER TABLE agents ADD COLUMN description TEXT;
    ALTER TABLE agents ADD COLUMN profile_status TEXT NOT NULL DEFAULT 'available' CHECK (profile_status IN ('available', 'busy', 'away'));
    ALTER TABLE agents ADD COLUMN profile_revision BIGINT NOT NULL DEFAULT 1;
    ALTER TABLE agents ADD COLUMN profile_updated_at BIGINT;
    CREATE TABLE workflow_plans (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        name TEXT NOT NULL,
        description TEXT,
        status TEXT NOT NULL CHECK (status IN ('active', 'archived')),
        latest_version BIGINT NOT NULL,
        published_version BIGINT,
        created_by_agent_id TEXT REFERENCES agents(id),
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX workflow_plans_by_update ON workflow_plans (workspace_id, updated_at DESC, id DESC);
    CREATE INDEX workflow_plans_by_status ON workflow_plans (workspace_id, status, updated_at DESC, id DESC);
    CREATE TABLE workflow_plan_versions (
        plan_id TEXT NOT NULL REFERENCES workflow_plans(id),
        version BIGINT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('draft', 'published')),
        steps TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        published_at BIGINT,
        PRIMARY KEY (plan_id, version)
    );
    CREATE TABLE workflow_triggers (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        plan_id TEXT NOT NULL REFERENCES workflow_plans(id),
        name TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('manual', 'scheduled')),
        status TEXT NOT NULL CHECK (status IN ('enabled', 'disabled', 'archived')),
        start_at BIGINT,
        every_minutes BIGINT,
        next_fire_at BIGINT,
        created_by_agent_id TEXT REFERENCES agents(id),
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX workflow_triggers_by_update ON workflow_triggers (workspace_id, updated_at DESC, id DESC);
    CREATE INDEX workflow_triggers_by_plan ON workflow_triggers (plan_id, updated_at DESC, id DESC);
    CREATE INDEX workflow_triggers_due ON workflow_triggers (next_fire_at, id) WHERE status = 'enabled' AND next_fire_at IS NOT NULL;
    CREATE TABLE workflow_runs (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        plan_id TEXT NOT NULL REFERENCES workflow_plans(id),
        plan_version BIGINT NOT NULL,
        trigger_id TEXT NOT NULL REFERENCES workflow_triggers(id),
        fire_at BIGINT,
        status TEXT NOT NULL CHECK (status IN ('running', 'waiting', 'completed', 'failed', 'cancelled')),
        current_step_key TEXT,
        started_by_agent_id TEXT REFERENCES agents(id),
        cancel_reason TEXT,
        log_entries BIGINT NOT NULL,
        log_section BIGINT NOT NULL,
        log_section_bytes BIGINT NOT NULL,
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        finished_at BIGINT,
        UNIQUE (trigger_id, fire_at)
    );
    CREATE INDEX workflow_runs_by_update ON workflow_runs (workspace_id, updated_at DESC, id DESC);
    CREATE INDEX workflow_runs_by_plan ON workflow_runs (plan_id, updated_at DESC, id DESC);
    CREATE INDEX workflow_runs_by_status ON workflow_runs (workspace_id, status, updated_at DESC, id DESC);
    CREATE TABLE workflow_steps (
        id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES workflow_runs(id),
        position BIGINT NOT NULL,
        step_key TEXT NOT NULL,
        title TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('task', 'approval')),
        instructions TEXT,
        status TEXT NOT NULL CHECK (status IN ('pending', 'active', 'paused', 'parked', 'waiting', 'completed', 'failed', 'cancelled')),
        approval_id TEXT,
        output TEXT,
        reason TEXT,
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        UNIQUE (run_id, position)
    );
    CREATE INDEX workflow_steps_by_update ON workflow_steps (run_id, updated_at DESC, id DESC);
    CREATE TABLE workflow_log (
        run_id TEXT NOT NULL REFERENCES workflow_runs(id),
        seq BIGINT NOT NULL,
        section BIGINT NOT NULL,
        at BIGINT NOT NULL,
        event TEXT NOT NULL,
        step_key TEXT,
        text TEXT,
        PRIMARY KEY (run_id, seq)
    );
    CREATE INDEX workflow_log_by_section ON workflow_log (run_id, section, seq);
    CREATE TABLE approvals (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        title TEXT NOT NULL,
        details TEXT,
        status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
        requested_by_agent_id TEXT REFERENCES agents(id),
        run_id TEXT REFERENCES workflow_runs(id),
        step_id TEXT REFERENCES workflow_steps(id),
        decided_by_human_id TEXT REFERENCES humans(id),
        comment TEXT,
        decided_at BIGINT,
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX approvals_by_update ON approvals (workspace_id, updated_at DESC, id DESC);
    CREATE INDEX approvals_by_status ON approvals (workspace_id, status, updated_at DESC, id DESC);
    "#,
    // 6: app-hosted extensions (recorded definition versions and the catalog version), app
    // installations and grants per workspace, and pull request watches.
    r#"
    CREATE TABLE extension_catalog (
        id BIGINT PRIMARY KEY CHECK (id = 1),
        version BIGINT NOT NULL
    );
    INSERT INTO extension_catalog (id, version) VALUES (1, 0);
    CREATE TABLE extensions (
        name TEXT PRIMARY KEY,
        current_version BIGINT NOT NULL
    );
    CREATE TABLE extension_versions (
        name TEXT NOT NULL REFERENCES extensions(name),
        version BIGINT NOT NULL,
        provider TEXT NOT NULL,
        definition TEXT NOT NULL,
        digest TEXT NOT NULL,
        catalog_version BIGINT NOT NULL,
        published_at BIGINT NOT NULL,
        PRIMARY KEY (name, version)
    );
    CREATE TABLE app_installations (
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        extension TEXT NOT NULL REFERENCES extensions(name),
        base_url TEXT NOT NULL,
        credential TEXT,
        status TEXT NOT NULL CHECK (status IN ('installed', 'revoked')),
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (workspace_id, extension)
    );
    CREATE TABLE app_grants (
        workspace_id TEXT NOT NULL,
        extension TEXT NOT NULL,
        agent_id TEXT NOT NULL REFERENCES agents(id),
        created_at BIGINT NOT NULL,
        PRIMARY KEY (workspace_id, extension, agent_id)
    );
    CREATE TABLE pr_watches (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        extension TEXT NOT NULL REFERENCES extensions(name),
        repository TEXT NOT NULL,
        number BIGINT NOT NULL,
        title TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('open', 'closed', 'merged')),
        head_sha TEXT NOT NULL,
        url TEXT NOT NULL,
        provider_updated_at BIGINT,
        last_refreshed_at BIGINT NOT NULL,
        refresh_claimed_until BIGINT,
        created_by_agent_id TEXT REFERENCES agents(id),
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        UNIQUE (workspace_id, extension, repository, number)
    );
    CREATE INDEX pr_watches_by_update ON pr_watches (workspace_id, extension, updated_at DESC, id DESC);
    CREATE INDEX pr_watches_by_refresh ON pr_watches (last_refreshed_at, id);
    "#,
    // 7: knowledge sources, their grants to channels and teams, and documents with their
    // full-text index (FTS5, external content kept in step by triggers).
    r#"
    CREATE TABLE kb_sources (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        name TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (workspace_id, name)
    );
    CREATE TABLE kb_grants (
        source_id TEXT NOT NULL REFERENCES kb_sources(id),
        grantee_kind TEXT NOT NULL CHECK (grantee_kind IN ('channel', 'team')),
        grantee_id TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (source_id, grantee_kind, grantee_id)
    );
    CREATE INDEX kb_grants_by_grantee ON kb_grants (grantee_kind, grantee_id);
    CREATE TABLE kb_documents (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        source_id TEXT NOT NULL REFERENCES kb_sources(id),
        src_tok TEXT NOT NULL,
        path TEXT NOT NULL,
        title TEXT NOT NULL,
        body TEXT NOT NULL,
        cjk TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        UNIQUE (source_id, path)
    );
    CREATE VIRTUAL TABLE kb_fts USING fts5(title, body, src_tok, cjk, content='kb_documents', content_rowid='seq', tokenize='porter unicode61 remove_diacritics 2');
    INSERT INTO kb_fts(kb_fts, rank) VALUES ('rank', 'bm25(3.0, 1.0, 0.0, 1.0)');
    CREATE TRIGGER kb_documents_ai AFTER INSERT ON kb_documents BEGIN
        INSERT INTO kb_fts(rowid, title, body, src_tok, cjk) VALUES (new.seq, new.title, new.body, new.src_tok, new.cjk);
    END;
    CREATE TRIGGER kb_documents_ad AFTER DELETE ON kb_documents BEGIN
        INSERT INTO kb_fts(kb_fts, rowid, title, body, src_tok, cjk) VALUES ('delete', old.seq, old.title, old.body, old.src_tok, old.cjk);
    END;
    CREATE TRIGGER kb_documents_au AFTER UPDATE ON kb_documents BEGIN
        INSERT INTO kb_fts(kb_fts, rowid, title, body, src_tok, cjk) VALUES ('delete', old.seq, old.title, old.body, old.src_tok, old.cjk);
        INSERT INTO kb_fts(rowid, title, body, src_tok, cjk) VALUES (new.seq, new.title, new.body, new.src_tok, new.cjk);
    END;
    "#,
    // 8: the audit trail (one row per runtime request and operator action, no values).
    r#"
    CREATE TABLE audit_records (
        id TEXT NOT NULL PRIMARY KEY,
        at BIGINT NOT NULL,
        workspace_id TEXT,
        device_id TEXT,
        agent_id TEXT,
        verified BIGINT NOT NULL,
        family TEXT NOT NULL,
        action TEXT NOT NULL,
        outcome TEXT NOT NULL,
        key_hash TEXT,
        duration_us BIGINT NOT NULL
    );
    CREATE INDEX audit_records_by_workspace ON audit_records (workspace_id, at DESC, id DESC);
    CREATE INDEX audit_records_by_time ON audit_records (at, id);
    "#,
    // 9: each message's reaction and attachment counts, kept by triggers in the writing
    // transaction: a page of messages knows which rows have reactions or attachments to fetch
    // without probing both tables for every row.
    r#"
    ALTER TABLE messages ADD COLUMN reaction_count BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE messages ADD COLUMN attachment_count BIGINT NOT NULL DEFAULT 0;
    UPDATE messages SET
        reaction_count = (SELECT COUNT(*) FROM reactions r WHERE r.message_id = messages.id),
        attachment_count = (SELECT COUNT(*) FROM attachments a WHERE a.message_id = messages.id);
    CREATE TRIGGER reactions_counted AFTER INSERT ON reactions BEGIN
        UPDATE messages SET reaction_count = reaction_count + 1 WHERE id = new.message_id;
    END;
    CREATE TRIGGER reactions_uncounted AFTER DELETE ON reactions BEGIN
        UPDATE messages SET reaction_count = reaction_count - 1 WHERE id = old.message_id;
    END;
    CREATE TRIGGER attachments_counted AFTER INSERT ON attachments BEGIN
        UPDATE messages SET attachment_count = attachment_count + 1 WHERE id = new.message_id;
    END;
    CREATE TRIGGER attachments_uncounted AFTER DELETE ON attachments BEGIN
        UPDATE messages SET attachment_count = attachment_count - 1 WHERE id = old.message_id;
    END;
    "#,
    // 10: the audit trail kept in its time order: the table is its own `(at, id)` index, so a
    // record is written into two B-trees rather than four (the rows, the id's unique index and
    // the two indexes). Every read and every retention delete goes by `(at, id)` or by workspace.
    r#"
    CREATE TABLE audit_records_by_at (
        id TEXT NOT NULL,
        at BIGINT NOT NULL,
        workspace_id TEXT,
        device_id TEXT,
        agent_id TEXT,
        verified BIGINT NOT NULL,
        family TEXT NOT NULL,
        action TEXT NOT NULL,
        outcome TEXT NOT NULL,
        key_hash TEXT,
        duration_us BIGINT NOT NULL,
        PRIMARY KEY (at, id)
    ) WITHOUT ROWID;
    INSERT INTO audit_records_by_at
        SELECT id, at, workspace_id, device_id, agent_id, verified, family, action, outcome,
               key_hash, duration_us
        FROM audit_records;
    DROP TABLE audit_records;
    ALTER TABLE audit_records_by_at RENAME TO audit_records;
    CREATE INDEX audit_records_by_workspace ON audit_records (workspace_id, at DESC, id DESC);
    "#,
    // 11: the human API: a person's idempotency records (as an agent's, keyed by the human), and
    // each member's read mark per conversation, from which unread counts are counted.
    r#"
    CREATE TABLE human_idempotency_keys (
        human_id TEXT NOT NULL REFERENCES humans(id),
        action TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        fingerprint BLOB NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('running', 'done')),
        status_code BIGINT,
        response TEXT,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (human_id, action, idempotency_key)
    );
    CREATE INDEX human_idempotency_by_age ON human_idempotency_keys (created_at);
    CREATE TABLE read_marks (
        member_id TEXT NOT NULL,
        conversation TEXT NOT NULL,
        read_at BIGINT NOT NULL,
        message_id TEXT NOT NULL,
        PRIMARY KEY (member_id, conversation)
    );
    CREATE INDEX channel_members_by_member ON channel_members (member_id, channel_id);
    CREATE INDEX threads_by_channel ON threads (channel_id, created_at DESC, id DESC);
    "#,
    // 12: the event feed: each workspace's changes a person may be shown live, numbered by
    // `event_heads.seq` in the transaction of the change.
    r#"
    CREATE TABLE event_heads (
        workspace_id TEXT PRIMARY KEY REFERENCES workspaces(id),
        seq BIGINT NOT NULL
    );
    CREATE TABLE events (
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        seq BIGINT NOT NULL,
        at BIGINT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('message', 'reaction', 'task', 'approval')),
        channel_id TEXT,
        thread_id TEXT,
        agent_id TEXT,
        subject TEXT NOT NULL,
        PRIMARY KEY (workspace_id, seq)
    );
    CREATE INDEX events_by_age ON events (at, seq);
    "#,
    // 13: deliveries (a person's message to an agent it wakes, decided in the message's
    // transaction; one per message and agent) and which device hosts an agent (its fence); the
    // event feed's kinds take `delivery` (SQLite changes a CHECK by rebuilding the table).
    r#"
    CREATE TABLE deliveries (
        id TEXT PRIMARY KEY,
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        message_id TEXT NOT NULL REFERENCES messages(id),
        agent_id TEXT NOT NULL REFERENCES agents(id),
        target TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'started', 'answered', 'ended', 'interrupted', 'failed', 'expired')),
        run_id TEXT,
        device_id TEXT,
        reply_id TEXT,
        reason TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        UNIQUE (message_id, agent_id)
    );
    CREATE INDEX deliveries_by_agent ON deliveries (agent_id, updated_at DESC, id DESC);
    CREATE INDEX deliveries_by_state ON deliveries (state, expires_at);
    CREATE INDEX deliveries_by_target ON deliveries (agent_id, target, state);
    CREATE TABLE agent_hosts (
        agent_id TEXT PRIMARY KEY REFERENCES agents(id),
        device_id TEXT NOT NULL,
        fence BIGINT NOT NULL,
        claimed_at BIGINT NOT NULL
    );
    CREATE TABLE events_with_deliveries (
        workspace_id TEXT NOT NULL REFERENCES workspaces(id),
        seq BIGINT NOT NULL,
        at BIGINT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('message', 'reaction', 'task', 'approval', 'delivery')),
        channel_id TEXT,
        thread_id TEXT,
        agent_id TEXT,
        subject TEXT NOT NULL,
        PRIMARY KEY (workspace_id, seq)
    );
    INSERT INTO events_with_deliveries SELECT workspace_id, seq, at, kind, channel_id, thread_id, agent_id, subject FROM events;
    DROP TABLE events;
    ALTER TABLE events_with_deliveries RENAME TO events;
    CREATE INDEX events_by_age ON events (at, seq);
    "#,
    // 14: who sent the message a delivery is for, so the deliveries one person's messages make
    // in a minute are counted by an index (the bound per sender).
    r#"
    ALTER TABLE deliveries ADD COLUMN sender_id TEXT;
    UPDATE deliveries SET sender_id = (SELECT m.author_id FROM messages m WHERE m.id = deliveries.message_id);
    CREATE INDEX deliveries_by_sender ON deliveries (sender_id, created_at);
    "#,
    // 15: the people besides its owner whose messages wake an agent.
    r#"
    CREATE TABLE agent_wakers (
        agent_id TEXT NOT NULL REFERENCES agents(id),
        human_id TEXT NOT NULL REFERENCES humans(id),
        created_at BIGINT NOT NULL,
        PRIMARY KEY (agent_id, human_id)
    );
    "#,
];

/// The same migrations for PostgreSQL, entry for entry (their versions are the same): `BLOB` is
/// `BYTEA`, and every text column sorts by bytes (`COLLATE "C"`), as SQLite's does, so keyset
/// order and cursors agree on both backends. The full-text index of migration 7 is each engine's
/// own (FTS5 there, `tsvector` + GIN here); the tables hold the same columns.
pub const PG_MIGRATIONS: &[&str] = &[
    // 1: tenancy, identity, conversation locators, tasks and reviews.
    r#"
    CREATE TABLE server_keys (
        name TEXT COLLATE "C" PRIMARY KEY,
        secret BYTEA NOT NULL
    );
    CREATE TABLE workspaces (
        id TEXT COLLATE "C" PRIMARY KEY,
        name TEXT COLLATE "C" NOT NULL,
        created_at BIGINT NOT NULL
    );
    CREATE TABLE humans (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        handle TEXT COLLATE "C" NOT NULL,
        display_name TEXT COLLATE "C" NOT NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (workspace_id, handle)
    );
    CREATE TABLE agents (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        owner_human_id TEXT COLLATE "C" NOT NULL REFERENCES humans(id),
        handle TEXT COLLATE "C" NOT NULL,
        display_name TEXT COLLATE "C" NOT NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (workspace_id, handle)
    );
    CREATE TABLE devices (
        id TEXT COLLATE "C" PRIMARY KEY,
        human_id TEXT COLLATE "C" NOT NULL REFERENCES humans(id),
        secret_hash BYTEA NOT NULL,
        created_at BIGINT NOT NULL,
        revoked_at BIGINT
    );
    CREATE TABLE channels (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        name TEXT COLLATE "C" NOT NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (workspace_id, name)
    );
    CREATE TABLE channel_members (
        channel_id TEXT COLLATE "C" NOT NULL REFERENCES channels(id),
        member_id TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (channel_id, member_id)
    );
    CREATE TABLE threads (
        id TEXT COLLATE "C" PRIMARY KEY,
        channel_id TEXT COLLATE "C" NOT NULL REFERENCES channels(id),
        title TEXT COLLATE "C" NOT NULL,
        created_at BIGINT NOT NULL
    );
    CREATE TABLE tasks (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        channel_id TEXT COLLATE "C" NOT NULL REFERENCES channels(id),
        thread_id TEXT COLLATE "C" REFERENCES threads(id),
        title TEXT COLLATE "C" NOT NULL,
        description TEXT COLLATE "C",
        status TEXT COLLATE "C" NOT NULL CHECK (status IN ('open', 'claimed', 'completed', 'cancelled')),
        assignee_agent_id TEXT COLLATE "C" REFERENCES agents(id),
        created_by_agent_id TEXT COLLATE "C" REFERENCES agents(id),
        result TEXT COLLATE "C",
        cancel_reason TEXT COLLATE "C",
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX tasks_by_location ON tasks (channel_id, thread_id, updated_at DESC, id ASC);
    CREATE TABLE reviews (
        id TEXT COLLATE "C" PRIMARY KEY,
        thread_id TEXT COLLATE "C" NOT NULL REFERENCES threads(id),
        task_id TEXT COLLATE "C" REFERENCES tasks(id),
        author_agent_id TEXT COLLATE "C" NOT NULL REFERENCES agents(id),
        verdict TEXT COLLATE "C" NOT NULL CHECK (verdict IN ('comment', 'approve', 'requestChanges')),
        body TEXT COLLATE "C" NOT NULL,
        status TEXT COLLATE "C" NOT NULL CHECK (status IN ('open', 'resolved')),
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX reviews_by_thread ON reviews (thread_id, updated_at DESC, id DESC);
    CREATE TABLE idempotency_keys (
        agent_id TEXT COLLATE "C" NOT NULL REFERENCES agents(id),
        action TEXT COLLATE "C" NOT NULL,
        idempotency_key TEXT COLLATE "C" NOT NULL,
        fingerprint BYTEA NOT NULL,
        state TEXT COLLATE "C" NOT NULL CHECK (state IN ('running', 'done')),
        status_code BIGINT,
        response TEXT COLLATE "C",
        created_at BIGINT NOT NULL,
        PRIMARY KEY (agent_id, action, idempotency_key)
    );
    CREATE INDEX idempotency_by_age ON idempotency_keys (created_at);
    "#,
    // 2: projects, teams, messages and scheduled messages with their runs.
    r#"
    CREATE TABLE projects (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        name TEXT COLLATE "C" NOT NULL,
        description TEXT COLLATE "C",
        status TEXT COLLATE "C" NOT NULL CHECK (status IN ('active', 'archived')),
        created_by_agent_id TEXT COLLATE "C" REFERENCES agents(id),
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX projects_by_update ON projects (workspace_id, updated_at DESC, id ASC);
    CREATE INDEX projects_by_status ON projects (workspace_id, status, updated_at DESC, id ASC);
    CREATE TABLE teams (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        handle TEXT COLLATE "C" NOT NULL,
        display_name TEXT COLLATE "C" NOT NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (workspace_id, handle)
    );
    CREATE INDEX teams_by_name ON teams (workspace_id, display_name, handle, id);
    CREATE TABLE team_members (
        team_id TEXT COLLATE "C" NOT NULL REFERENCES teams(id),
        member_kind TEXT COLLATE "C" NOT NULL CHECK (member_kind IN ('human', 'agent')),
        member_id TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (team_id, member_id)
    );
    CREATE TABLE messages (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        channel_id TEXT COLLATE "C" NOT NULL REFERENCES channels(id),
        thread_id TEXT COLLATE "C" REFERENCES threads(id),
        author_id TEXT COLLATE "C" NOT NULL,
        content TEXT COLLATE "C" NOT NULL,
        created_at BIGINT NOT NULL
    );
    CREATE INDEX messages_by_location ON messages (channel_id, thread_id, created_at DESC, id DESC);
    CREATE TABLE scheduled_messages (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        channel_id TEXT COLLATE "C" NOT NULL REFERENCES channels(id),
        thread_id TEXT COLLATE "C" REFERENCES threads(id),
        content TEXT COLLATE "C" NOT NULL,
        send_at BIGINT NOT NULL,
        repeat_every_minutes BIGINT,
        next_run_at BIGINT,
        status TEXT COLLATE "C" NOT NULL CHECK (status IN ('scheduled', 'done', 'cancelled')),
        created_by_agent_id TEXT COLLATE "C" NOT NULL REFERENCES agents(id),
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX schedules_by_location ON scheduled_messages (channel_id, thread_id, created_at DESC, id DESC);
    CREATE INDEX schedules_due ON scheduled_messages (status, next_run_at);
    CREATE TABLE scheduled_runs (
        id TEXT COLLATE "C" PRIMARY KEY,
        scheduled_message_id TEXT COLLATE "C" NOT NULL REFERENCES scheduled_messages(id),
        status TEXT COLLATE "C" NOT NULL CHECK (status IN ('pending', 'sent', 'failed')),
        created_at BIGINT NOT NULL,
        attempted_at BIGINT,
        message_id TEXT COLLATE "C" REFERENCES messages(id),
        failure TEXT COLLATE "C"
    );
    CREATE INDEX runs_by_schedule ON scheduled_runs (scheduled_message_id, (COALESCE(attempted_at, created_at)) DESC, id DESC);
    "#,
    // 3: direct conversations (channels of kind `dm`), reactions and attachments.
    r#"
    ALTER TABLE channels ADD COLUMN kind TEXT COLLATE "C" NOT NULL DEFAULT 'channel' CHECK (kind IN ('channel', 'dm'));
    CREATE TABLE reactions (
        message_id TEXT COLLATE "C" NOT NULL REFERENCES messages(id),
        emoji TEXT COLLATE "C" NOT NULL,
        member_id TEXT COLLATE "C" NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (message_id, emoji, member_id)
    );
    CREATE TABLE attachments (
        id TEXT COLLATE "C" PRIMARY KEY,
        message_id TEXT COLLATE "C" NOT NULL REFERENCES messages(id),
        position BIGINT NOT NULL,
        name TEXT COLLATE "C" NOT NULL,
        media_type TEXT COLLATE "C" NOT NULL,
        size BIGINT NOT NULL,
        content BYTEA NOT NULL,
        created_at BIGINT NOT NULL
    );
    CREATE INDEX attachments_by_message ON attachments (message_id, position);
    "#,
    // 4: the scheduler's pending runs, found without scanning the whole run history.
    r#"
    CREATE INDEX runs_pending ON scheduled_runs (created_at, id) WHERE status = 'pending';
    "#,
    // 5: public agent profiles, workflows (plans and their versions, triggers, runs, steps, run
    // logs) and approvals.
    r#"
    ALTER TABLE agents ADD COLUMN description TEXT COLLATE "C";
    ALTER TABLE agents ADD COLUMN profile_status TEXT COLLATE "C" NOT NULL DEFAULT 'available' CHECK (profile_status IN ('available', 'busy', 'away'));
    ALTER TABLE agents ADD COLUMN profile_revision BIGINT NOT NULL DEFAULT 1;
    ALTER TABLE agents ADD COLUMN profile_updated_at BIGINT;
    CREATE TABLE workflow_plans (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        name TEXT COLLATE "C" NOT NULL,
        description TEXT COLLATE "C",
        status TEXT COLLATE "C" NOT NULL CHECK (status IN ('active', 'archived')),
        latest_version BIGINT NOT NULL,
        published_version BIGINT,
        created_by_agent_id TEXT COLLATE "C" REFERENCES agents(id),
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX workflow_plans_by_update ON workflow_plans (workspace_id, updated_at DESC, id DESC);
    CREATE INDEX workflow_plans_by_status ON workflow_plans (workspace_id, status, updated_at DESC, id DESC);
    CREATE TABLE workflow_plan_versions (
        plan_id TEXT COLLATE "C" NOT NULL REFERENCES workflow_plans(id),
        version BIGINT NOT NULL,
        state TEXT COLLATE "C" NOT NULL CHECK (state IN ('draft', 'published')),
        steps TEXT COLLATE "C" NOT NULL,
        created_at BIGINT NOT NULL,
        published_at BIGINT,
        PRIMARY KEY (plan_id, version)
    );
    CREATE TABLE workflow_triggers (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        plan_id TEXT COLLATE "C" NOT NULL REFERENCES workflow_plans(id),
        name TEXT COLLATE "C" NOT NULL,
        kind TEXT COLLATE "C" NOT NULL CHECK (kind IN ('manual', 'scheduled')),
        status TEXT COLLATE "C" NOT NULL CHECK (status IN ('enabled', 'disabled', 'archived')),
        start_at BIGINT,
        every_minutes BIGINT,
        next_fire_at BIGINT,
        created_by_agent_id TEXT COLLATE "C" REFERENCES agents(id),
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX workflow_triggers_by_update ON workflow_triggers (workspace_id, updated_at DESC, id DESC);
    CREATE INDEX workflow_triggers_by_plan ON workflow_triggers (plan_id, updated_at DESC, id DESC);
    CREATE INDEX workflow_triggers_due ON workflow_triggers (next_fire_at, id) WHERE status = 'enabled' AND next_fire_at IS NOT NULL;
    CREATE TABLE workflow_runs (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        plan_id TEXT COLLATE "C" NOT NULL REFERENCES workflow_plans(id),
        plan_version BIGINT NOT NULL,
        trigger_id TEXT COLLATE "C" NOT NULL REFERENCES workflow_triggers(id),
        fire_at BIGINT,
        status TEXT COLLATE "C" NOT NULL CHECK (status IN ('running', 'waiting', 'completed', 'failed', 'cancelled')),
        current_step_key TEXT COLLATE "C",
        started_by_agent_id TEXT COLLATE "C" REFERENCES agents(id),
        cancel_reason TEXT COLLATE "C",
        log_entries BIGINT NOT NULL,
        log_section BIGINT NOT NULL,
        log_section_bytes BIGINT NOT NULL,
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        finished_at BIGINT,
        UNIQUE (trigger_id, fire_at)
    );
    CREATE INDEX workflow_runs_by_update ON workflow_runs (workspace_id, updated_at DESC, id DESC);
    CREATE INDEX workflow_runs_by_plan ON workflow_runs (plan_id, updated_at DESC, id DESC);
    CREATE INDEX workflow_runs_by_status ON workflow_runs (workspace_id, status, updated_at DESC, id DESC);
    CREATE TABLE workflow_steps (
        id TEXT COLLATE "C" PRIMARY KEY,
        run_id TEXT COLLATE "C" NOT NULL REFERENCES workflow_runs(id),
        position BIGINT NOT NULL,
        step_key TEXT COLLATE "C" NOT NULL,
        title TEXT COLLATE "C" NOT NULL,
        kind TEXT COLLATE "C" NOT NULL CHECK (kind IN ('task', 'approval')),
        instructions TEXT COLLATE "C",
        status TEXT COLLATE "C" NOT NULL CHECK (status IN ('pending', 'active', 'paused', 'parked', 'waiting', 'completed', 'failed', 'cancelled')),
        approval_id TEXT COLLATE "C",
        output TEXT COLLATE "C",
        reason TEXT COLLATE "C",
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        UNIQUE (run_id, position)
    );
    CREATE INDEX workflow_steps_by_update ON workflow_steps (run_id, updated_at DESC, id DESC);
    CREATE TABLE workflow_log (
        run_id TEXT COLLATE "C" NOT NULL REFERENCES workflow_runs(id),
        seq BIGINT NOT NULL,
        section BIGINT NOT NULL,
        at BIGINT NOT NULL,
        event TEXT COLLATE "C" NOT NULL,
        step_key TEXT COLLATE "C",
        text TEXT COLLATE "C",
        PRIMARY KEY (run_id, seq)
    );
    CREATE INDEX workflow_log_by_section ON workflow_log (run_id, section, seq);
    CREATE TABLE approvals (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        title TEXT COLLATE "C" NOT NULL,
        details TEXT COLLATE "C",
        status TEXT COLLATE "C" NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
        requested_by_agent_id TEXT COLLATE "C" REFERENCES agents(id),
        run_id TEXT COLLATE "C" REFERENCES workflow_runs(id),
        step_id TEXT COLLATE "C" REFERENCES workflow_steps(id),
        decided_by_human_id TEXT COLLATE "C" REFERENCES humans(id),
        comment TEXT COLLATE "C",
        decided_at BIGINT,
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX approvals_by_update ON approvals (workspace_id, updated_at DESC, id DESC);
    CREATE INDEX approvals_by_status ON approvals (workspace_id, status, updated_at DESC, id DESC);
    "#,
    // 6: app-hosted extensions (recorded definition versions and the catalog version), app
    // installations and grants per workspace, and pull request watches.
    r#"
    CREATE TABLE extension_catalog (
        id BIGINT PRIMARY KEY CHECK (id = 1),
        version BIGINT NOT NULL
    );
    INSERT INTO extension_catalog (id, version) VALUES (1, 0);
    CREATE TABLE extensions (
        name TEXT COLLATE "C" PRIMARY KEY,
        current_version BIGINT NOT NULL
    );
    CREATE TABLE extension_versions (
        name TEXT COLLATE "C" NOT NULL REFERENCES extensions(name),
        version BIGINT NOT NULL,
        provider TEXT COLLATE "C" NOT NULL,
        definition TEXT COLLATE "C" NOT NULL,
        digest TEXT COLLATE "C" NOT NULL,
        catalog_version BIGINT NOT NULL,
        published_at BIGINT NOT NULL,
        PRIMARY KEY (name, version)
    );
    CREATE TABLE app_installations (
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        extension TEXT COLLATE "C" NOT NULL REFERENCES extensions(name),
        base_url TEXT COLLATE "C" NOT NULL,
        credential TEXT COLLATE "C",
        status TEXT COLLATE "C" NOT NULL CHECK (status IN ('installed', 'revoked')),
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (workspace_id, extension)
    );
    CREATE TABLE app_grants (
        workspace_id TEXT COLLATE "C" NOT NULL,
        extension TEXT COLLATE "C" NOT NULL,
        agent_id TEXT COLLATE "C" NOT NULL REFERENCES agents(id),
        created_at BIGINT NOT NULL,
        PRIMARY KEY (workspace_id, extension, agent_id)
    );
    CREATE TABLE pr_watches (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        extension TEXT COLLATE "C" NOT NULL REFERENCES extensions(name),
        repository TEXT COLLATE "C" NOT NULL,
        number BIGINT NOT NULL,
        title TEXT COLLATE "C" NOT NULL,
        state TEXT COLLATE "C" NOT NULL CHECK (state IN ('open', 'closed', 'merged')),
        head_sha TEXT COLLATE "C" NOT NULL,
        url TEXT COLLATE "C" NOT NULL,
        provider_updated_at BIGINT,
        last_refreshed_at BIGINT NOT NULL,
        refresh_claimed_until BIGINT,
        created_by_agent_id TEXT COLLATE "C" REFERENCES agents(id),
        revision BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        UNIQUE (workspace_id, extension, repository, number)
    );
    CREATE INDEX pr_watches_by_update ON pr_watches (workspace_id, extension, updated_at DESC, id DESC);
    CREATE INDEX pr_watches_by_refresh ON pr_watches (last_refreshed_at, id);
    "#,
    // 7: knowledge sources, their grants, and documents with their full-text index: a generated
    // `tsvector` (title weighted over body, the CJK bigram column in the `simple` configuration)
    // under GIN, and per-lexeme document frequencies kept by a trigger for IDF ranking
    // (`ts_rank` has none).
    r#"
    CREATE TABLE kb_sources (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        name TEXT COLLATE "C" NOT NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (workspace_id, name)
    );
    CREATE TABLE kb_grants (
        source_id TEXT COLLATE "C" NOT NULL REFERENCES kb_sources(id),
        grantee_kind TEXT COLLATE "C" NOT NULL CHECK (grantee_kind IN ('channel', 'team')),
        grantee_id TEXT COLLATE "C" NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (source_id, grantee_kind, grantee_id)
    );
    CREATE INDEX kb_grants_by_grantee ON kb_grants (grantee_kind, grantee_id);
    CREATE TABLE kb_documents (
        seq BIGSERIAL PRIMARY KEY,
        id TEXT COLLATE "C" NOT NULL UNIQUE,
        source_id TEXT COLLATE "C" NOT NULL REFERENCES kb_sources(id),
        src_tok TEXT COLLATE "C" NOT NULL,
        path TEXT COLLATE "C" NOT NULL,
        title TEXT COLLATE "C" NOT NULL,
        body TEXT COLLATE "C" NOT NULL,
        cjk TEXT COLLATE "C" NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        tsv tsvector GENERATED ALWAYS AS (
            setweight(to_tsvector('english'::regconfig, title), 'A')
            || setweight(to_tsvector('english'::regconfig, body), 'B')
            || setweight(to_tsvector('simple'::regconfig, cjk), 'B')
        ) STORED,
        title_tsv tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, title)) STORED,
        UNIQUE (source_id, path)
    );
    CREATE INDEX kb_documents_tsv ON kb_documents USING gin (tsv);
    CREATE INDEX kb_documents_title ON kb_documents USING gin (title_tsv);
    CREATE TABLE kb_lexeme_df (
        lexeme TEXT COLLATE "C" PRIMARY KEY,
        df BIGINT NOT NULL
    );
    CREATE FUNCTION kb_documents_df() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            UPDATE kb_lexeme_df SET df = df - 1
                WHERE lexeme = ANY (array_prepend('', tsvector_to_array(OLD.tsv)));
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO kb_lexeme_df (lexeme, df)
                SELECT l, 1 FROM unnest(array_prepend('', tsvector_to_array(NEW.tsv))) AS l ORDER BY l
                ON CONFLICT (lexeme) DO UPDATE SET df = kb_lexeme_df.df + 1;
        END IF;
        RETURN NULL;
    END
    $fn$;
    CREATE TRIGGER kb_documents_df AFTER INSERT OR UPDATE OR DELETE ON kb_documents
        FOR EACH ROW EXECUTE FUNCTION kb_documents_df();
    "#,
    // 8: the audit trail (one row per runtime request and operator action, no values).
    r#"
    CREATE TABLE audit_records (
        id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        at BIGINT NOT NULL,
        workspace_id TEXT COLLATE "C",
        device_id TEXT COLLATE "C",
        agent_id TEXT COLLATE "C",
        verified BIGINT NOT NULL,
        family TEXT COLLATE "C" NOT NULL,
        action TEXT COLLATE "C" NOT NULL,
        outcome TEXT COLLATE "C" NOT NULL,
        key_hash TEXT COLLATE "C",
        duration_us BIGINT NOT NULL
    );
    CREATE INDEX audit_records_by_workspace ON audit_records (workspace_id, at DESC, id DESC);
    CREATE INDEX audit_records_by_time ON audit_records (at, id);
    "#,
    // 9: each message's reaction and attachment counts, kept by a trigger in the writing
    // transaction (an `UPDATE` of the message row, which also orders concurrent writers).
    r#"
    ALTER TABLE messages
        ADD COLUMN reaction_count BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN attachment_count BIGINT NOT NULL DEFAULT 0;
    UPDATE messages g SET
        reaction_count = (SELECT COUNT(*) FROM reactions r WHERE r.message_id = g.id),
        attachment_count = (SELECT COUNT(*) FROM attachments a WHERE a.message_id = g.id);
    CREATE FUNCTION messages_counts() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        IF TG_TABLE_NAME = 'reactions' THEN
            IF TG_OP = 'INSERT' THEN
                UPDATE messages SET reaction_count = reaction_count + 1 WHERE id = NEW.message_id;
            ELSE
                UPDATE messages SET reaction_count = reaction_count - 1 WHERE id = OLD.message_id;
            END IF;
        ELSIF TG_OP = 'INSERT' THEN
            UPDATE messages SET attachment_count = attachment_count + 1 WHERE id = NEW.message_id;
        ELSE
            UPDATE messages SET attachment_count = attachment_count - 1 WHERE id = OLD.message_id;
        END IF;
        RETURN NULL;
    END
    $fn$;
    CREATE TRIGGER reactions_counted AFTER INSERT OR DELETE ON reactions
        FOR EACH ROW EXECUTE FUNCTION messages_counts();
    CREATE TRIGGER attachments_counted AFTER INSERT OR DELETE ON attachments
        FOR EACH ROW EXECUTE FUNCTION messages_counts();
    "#,
    // 10: the audit trail keyed by `(at, id)`, as on SQLite: the key replaces the time index.
    r#"
    ALTER TABLE audit_records DROP CONSTRAINT audit_records_pkey;
    ALTER TABLE audit_records ADD PRIMARY KEY (at, id);
    DROP INDEX audit_records_by_time;
    "#,
    // 11: the human API's idempotency records and read marks, as on SQLite.
    r#"
    CREATE TABLE human_idempotency_keys (
        human_id TEXT COLLATE "C" NOT NULL REFERENCES humans(id),
        action TEXT COLLATE "C" NOT NULL,
        idempotency_key TEXT COLLATE "C" NOT NULL,
        fingerprint BYTEA NOT NULL,
        state TEXT COLLATE "C" NOT NULL CHECK (state IN ('running', 'done')),
        status_code BIGINT,
        response TEXT COLLATE "C",
        created_at BIGINT NOT NULL,
        PRIMARY KEY (human_id, action, idempotency_key)
    );
    CREATE INDEX human_idempotency_by_age ON human_idempotency_keys (created_at);
    CREATE TABLE read_marks (
        member_id TEXT COLLATE "C" NOT NULL,
        conversation TEXT COLLATE "C" NOT NULL,
        read_at BIGINT NOT NULL,
        message_id TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (member_id, conversation)
    );
    CREATE INDEX channel_members_by_member ON channel_members (member_id, channel_id);
    CREATE INDEX threads_by_channel ON threads (channel_id, created_at DESC, id DESC);
    "#,
    // 12: the event feed, as on SQLite.
    r#"
    CREATE TABLE event_heads (
        workspace_id TEXT COLLATE "C" PRIMARY KEY REFERENCES workspaces(id),
        seq BIGINT NOT NULL
    );
    CREATE TABLE events (
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        seq BIGINT NOT NULL,
        at BIGINT NOT NULL,
        kind TEXT COLLATE "C" NOT NULL CHECK (kind IN ('message', 'reaction', 'task', 'approval')),
        channel_id TEXT COLLATE "C",
        thread_id TEXT COLLATE "C",
        agent_id TEXT COLLATE "C",
        subject TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (workspace_id, seq)
    );
    CREATE INDEX events_by_age ON events (at, seq);
    "#,
    // 13: deliveries and agent hosts; the event feed's kinds take `delivery`.
    r#"
    CREATE TABLE deliveries (
        id TEXT COLLATE "C" PRIMARY KEY,
        workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces(id),
        message_id TEXT COLLATE "C" NOT NULL REFERENCES messages(id),
        agent_id TEXT COLLATE "C" NOT NULL REFERENCES agents(id),
        target TEXT COLLATE "C" NOT NULL,
        state TEXT COLLATE "C" NOT NULL CHECK (state IN ('pending', 'started', 'answered', 'ended', 'interrupted', 'failed', 'expired')),
        run_id TEXT COLLATE "C",
        device_id TEXT COLLATE "C",
        reply_id TEXT COLLATE "C",
        reason TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        UNIQUE (message_id, agent_id)
    );
    CREATE INDEX deliveries_by_agent ON deliveries (agent_id, updated_at DESC, id DESC);
    CREATE INDEX deliveries_by_state ON deliveries (state, expires_at);
    CREATE INDEX deliveries_by_target ON deliveries (agent_id, target, state);
    CREATE TABLE agent_hosts (
        agent_id TEXT COLLATE "C" PRIMARY KEY REFERENCES agents(id),
        device_id TEXT COLLATE "C" NOT NULL,
        fence BIGINT NOT NULL,
        claimed_at BIGINT NOT NULL
    );
    ALTER TABLE events DROP CONSTRAINT events_kind_check;
    ALTER TABLE events ADD CONSTRAINT events_kind_check
        CHECK (kind IN ('message', 'reaction', 'task', 'approval', 'delivery'));
    "#,
    // 14 (and `reason`, which 13 made without the byte collation every text column has)
    r#"
    ALTER TABLE deliveries ALTER COLUMN reason TYPE TEXT COLLATE "C";
    ALTER TABLE deliveries ADD COLUMN sender_id TEXT COLLATE "C";
    UPDATE deliveries SET sender_id = (SELECT m.author_id FROM messages m WHERE m.id = deliveries.message_id);
    CREATE INDEX deliveries_by_sender ON deliveries (sender_id, created_at);
    "#,
    // 15: the people besides its owner whose messages wake an agent.
    r#"
    CREATE TABLE agent_wakers (
        agent_id TEXT COLLATE "C" NOT NULL REFERENCES agents(id),
        human_id TEXT COLLATE "C" NOT NULL REFERENCES humans(id),
        created_at BIGINT NOT NULL,
        PRIMARY KEY (agent_id, human_id)
    );
    "#,
];

const _: () = assert!(MIGRATIONS.len() == PG_MIGRATIONS.len());

/// The schema version this binary migrates a database to (on either backend).
pub const SCHEMA_VERSION: usize = MIGRATIONS.len();
