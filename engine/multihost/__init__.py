"""Load from several client hosts in one session, through the group's own key-value store."""
