"""Initial schema: conversations as message trees, presets, model profiles, comparisons.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "presets",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("system_prompt", sa.Text, nullable=False),
        sa.Column("sampling_json", sa.Text, nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "model_profiles",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("path", sa.Text),
        sa.Column("size_bytes", sa.Integer),
        sa.Column("sha256", sa.String(64)),
        sa.Column("architecture", sa.String(64)),
        sa.Column("context_length", sa.Integer),
        sa.Column("base_url", sa.Text),
        sa.Column("remote_model", sa.String(200)),
        sa.Column("load_settings_json", sa.Text, nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "comparisons",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("title", sa.String(500), nullable=False),
        sa.Column("settings_json", sa.Text, nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "conversations",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("title", sa.String(500), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("model_ref", sa.Text),
        sa.Column("preset_id", sa.Integer, sa.ForeignKey("presets.id", ondelete="SET NULL")),
        sa.Column(
            "comparison_id", sa.Integer, sa.ForeignKey("comparisons.id", ondelete="SET NULL")
        ),
        sa.Column("sampling_json", sa.Text, nullable=False),
        sa.Column("pinned", sa.Boolean, nullable=False),
        sa.Column("archived", sa.Boolean, nullable=False),
        sa.Column("active_message_id", sa.Integer),
        sa.Column("deleted_at", TS),
    )
    op.create_table(
        "messages",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "conversation_id",
            sa.Integer,
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey("messages.id", ondelete="CASCADE")),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error_text", sa.Text),
        sa.Column("prompt_tokens", sa.Integer),
        sa.Column("completion_tokens", sa.Integer),
        sa.Column("ttft_s", sa.Float),
        sa.Column("tokens_per_s", sa.Float),
        sa.Column("model", sa.Text),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_index("ix_messages_parent_id", "messages", ["parent_id"])
    op.create_index("ix_messages_conversation_parent", "messages", ["conversation_id", "parent_id"])
    op.create_table(
        "settings",
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("value_json", sa.Text, nullable=False),
    )


def downgrade() -> None:
    for table in ("settings", "messages", "conversations", "comparisons", "model_profiles", "presets"):
        op.drop_table(table)
