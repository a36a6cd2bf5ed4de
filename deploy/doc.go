// Package deploy holds no code: deploy_test.go checks the deployment files
// beside it (dashboard, alert rules, manifests, units) against what the
// service really exports and reads, so they cannot drift from it.
package deploy
