"""What people are told and may ask between runs: `doctor`, `submit`, the queue's
order, `status`'s integrity view, notifications."""
