-- Headless Neovim, as a user would: open model.py, start `tensorviz lsp`, trust the
-- workspace with the server's command, wait for the "Open as Graph" code lens, run
-- it, and record the URL the server asks Neovim to open (window/showDocument with
-- external = true goes through vim.ui.open, replaced here). Results go to $TV_OUT.
local out_path = assert(os.getenv("TV_OUT"))
local ws = assert(os.getenv("TV_WS"))
local cmd = vim.json.decode(assert(os.getenv("TV_CMD")))
local result = { messages = {}, lenses = {} }

local done_path = out_path .. ".done"

-- Write the result, then keep the editor (and so the server and its viewer) alive
-- until the test has fetched the URL and says it is done.
local function finish(err)
  result.error = err
  local tmp = out_path .. ".tmp"
  local fh = assert(io.open(tmp, "w"))
  fh:write(vim.json.encode(result))
  fh:close()
  os.rename(tmp, out_path)
  vim.wait(90000, function() return vim.uv.fs_stat(done_path) ~= nil end, 100)
  for _, c in ipairs(vim.lsp.get_clients()) do c:stop() end
  vim.wait(5000, function() return #vim.lsp.get_clients() == 0 end, 50)
  vim.cmd("qall!")
end

local ok, err = pcall(function()
  vim.ui.open = function(url)
    result.opened = (result.opened or 0) + 1
    result.url = result.url or url
    result.last_opened = url
    return { wait = function() return { code = 0 } end }, nil
  end
  local show_message = vim.lsp.handlers["window/showMessage"]
  vim.lsp.handlers["window/showMessage"] = function(e, params, ctx)
    table.insert(result.messages, params.message)
    return show_message(e, params, ctx)
  end

  vim.cmd.edit(ws .. "/model.py")
  local bufnr = vim.api.nvim_get_current_buf()
  -- As docs/editors.md sets it up: Neovim has no handler for workspace/codeLens/refresh,
  -- so the config advertises it and handles it (lens titles follow saved profiles).
  result.lens_refreshes = 0
  local id = assert(vim.lsp.start({
    name = "tensorviz", cmd = cmd, root_dir = ws,
    capabilities = { workspace = { codeLens = { refreshSupport = true } } },
    handlers = {
      ["workspace/codeLens/refresh"] = function()
        result.lens_refreshes = result.lens_refreshes + 1
        vim.lsp.codelens.refresh()
        return vim.NIL
      end,
    },
  }))
  local client = assert(vim.lsp.get_client_by_id(id))
  assert(vim.wait(60000, function() return client.initialized end, 50), "server did not initialize")
  result.server = client.server_info

  -- Trust the workspace, as a user would with `:lua vim.lsp.buf...` or a keymap.
  local trusted = false
  client:exec_cmd({ title = "Trust workspace", command = "tensorviz.trustWorkspace", arguments = {} }, { bufnr = bufnr },
    function(e) trusted = (e == nil) end)
  assert(vim.wait(30000, function() return trusted end, 50), "trust command failed")

  -- Lenses, as `vim.lsp.codelens.refresh()` on BufEnter/InsertLeave would fetch them.
  local lenses = {}
  assert(vim.wait(60000, function()
    vim.lsp.codelens.refresh({ bufnr = bufnr })
    vim.wait(300)
    lenses = vim.lsp.codelens.get(bufnr)
    return #lenses > 0
  end, 100), "no code lens arrived")
  for _, lens in ipairs(lenses) do
    table.insert(result.lenses, { title = lens.command and lens.command.title, line = lens.range.start.line })
  end

  -- Put the cursor on the lens and run it (`:lua vim.lsp.codelens.run()`).
  vim.api.nvim_win_set_cursor(0, { lenses[1].range.start.line + 1, 0 })
  vim.lsp.codelens.run()
  assert(vim.wait(100000, function() return result.url ~= nil end, 100), "the viewer URL never came")

  -- The graph again, without capturing (`tensorviz.showViewer PROFILE`).
  local shown = false
  client:exec_cmd({ title = "Show viewer", command = "tensorviz.showViewer", arguments = { "jax_example" } },
    { bufnr = bufnr }, function(e) shown = (e == nil) end)
  assert(vim.wait(30000, function() return shown and (result.opened or 0) >= 2 end, 50), "showViewer opened nothing")

  -- The profile renamed in recipes.toml, edited and written in Neovim: the lens on
  -- model.py follows without any edit of model.py (the server's codeLens refresh).
  vim.cmd.edit(ws .. "/.tensorviz/recipes.toml")
  local tbuf = vim.api.nvim_get_current_buf()
  vim.lsp.buf_attach_client(tbuf, id)
  local lines = vim.api.nvim_buf_get_lines(tbuf, 0, -1, false)
  for i, l in ipairs(lines) do lines[i] = (l:gsub("%[profiles%.jax_example", "[profiles.renamed")) end
  vim.api.nvim_buf_set_lines(tbuf, 0, -1, false, lines)
  vim.cmd("write")
  assert(vim.wait(30000, function()
    local ls = vim.lsp.codelens.get(bufnr)
    return ls[1] ~= nil and ls[1].command ~= nil and ls[1].command.title == "Open as Graph (renamed)"
  end, 100), "the lens title did not follow the renamed profile")
  result.renamed_title = vim.lsp.codelens.get(bufnr)[1].command.title
  result.log_level = vim.lsp.log.get_level()
  result.log_path = vim.lsp.get_log_path()
end)
finish(not ok and tostring(err) or nil)
