"""Human-in-the-loop approvals: requests, revalidation and the inbox (built in the approvals issue)."""
